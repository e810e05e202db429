"""Look-alike of WT201: one kernel launched every step of a time loop, on new memory.

``step`` is recorded ``steps`` times with the same parameters, but each launch reads
state k and writes a distinct state k+1 (a list of ``steps + 1`` buffers, all with
``retain_grad=True`` so the trajectory's adjoints can be inspected). Not a duplicate:
each store is the only write to its memory, and the gradient is exact.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
DT = 0.1


@wp.kernel
def step(
    q: wp.array(dtype=float),
    qd: wp.array(dtype=float),
    force: wp.array(dtype=float),
    q_out: wp.array(dtype=float),
    qd_out: wp.array(dtype=float),
):
    i = wp.tid()
    v = qd[i] + DT * (force[i] - 2.0 * wp.sin(q[i]))
    qd_out[i] = v
    q_out[i] = q[i] + DT * v


@wp.kernel
def distance(q: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = q[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


def simulate_np(force, q0, qd0, steps):
    q, qd = q0.copy(), qd0.copy()
    for _ in range(steps):
        qd = qd + DT * (force - 2.0 * np.sin(q))
        q = q + DT * qd
    return q


def central_differences(f, x, eps=1e-5):
    g = np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2.0 * eps)
    return g


def run() -> dict:
    n, steps = 4, 6
    q0 = np.array([0.1, -0.4, 0.8, 0.0])
    qd0 = np.array([0.0, 0.5, -0.2, 0.3])
    f_np = np.array([1.0, -0.5, 0.25, 2.0])
    t_np = np.array([0.5, 0.0, 0.4, 1.0])
    force = wp.array(f_np, dtype=float, requires_grad=True, device=DEVICE)
    target = wp.array(t_np, dtype=float, device=DEVICE)
    qs = [wp.array(q0, dtype=float, requires_grad=True, retain_grad=True, device=DEVICE)]
    qds = [wp.array(qd0, dtype=float, requires_grad=True, retain_grad=True, device=DEVICE)]
    for _ in range(steps):
        qs.append(wp.zeros(n, dtype=float, requires_grad=True, retain_grad=True, device=DEVICE))
        qds.append(wp.zeros(n, dtype=float, requires_grad=True, retain_grad=True, device=DEVICE))
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        for k in range(steps):
            wp.launch(
                step, dim=n, inputs=[qs[k], qds[k], force], outputs=[qs[k + 1], qds[k + 1]], device=DEVICE
            )
        wp.launch(distance, dim=n, inputs=[qs[-1], target], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    objective = lambda f: float(np.sum((simulate_np(f, q0, qd0, steps) - t_np) ** 2))
    return {"grad": force.grad.numpy().copy(), "expected": central_differences(objective, f_np)}


if __name__ == "__main__":
    run()
