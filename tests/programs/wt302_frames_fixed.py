"""WT302 fixed twin: one tape over the whole horizon, ``steps + 1`` distinct state buffers, one backward."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
DT = 0.1
SUBSTEPS = 2


@wp.kernel
def step(
    q: wp.array(dtype=float),
    qd: wp.array(dtype=float),
    force: wp.array(dtype=float),
    q_out: wp.array(dtype=float),
    qd_out: wp.array(dtype=float),
):
    i = wp.tid()
    v = qd[i] + DT * (force[i] - 4.0 * q[i] - 0.5 * qd[i])
    qd_out[i] = v
    q_out[i] = q[i] + DT * v


@wp.kernel
def track(q: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = q[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


def objective_np(force, q0, qd0, targets):
    q, qd, total = q0.copy(), qd0.copy(), 0.0
    for target in targets:
        for _ in range(SUBSTEPS):
            qd = qd + DT * (force - 4.0 * q - 0.5 * qd)
            q = q + DT * qd
        total += float(np.sum((q - target) ** 2))
    return total


def central_differences(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2.0 * eps)
    return g


def run() -> dict:
    n, frames = 3, 4
    steps = frames * SUBSTEPS
    q0 = np.array([0.0, 0.5, -0.3])
    qd0 = np.array([0.2, 0.0, 0.1])
    f_np = np.array([1.0, -0.5, 2.0])
    targets_np = [np.array([0.1, 0.3, 0.0]) * (k + 1) for k in range(frames)]
    force = wp.array(f_np, dtype=float, requires_grad=True, device=DEVICE)
    targets = [wp.array(t, dtype=float, device=DEVICE) for t in targets_np]

    qs = [wp.array(q0, dtype=float, requires_grad=True, device=DEVICE)]
    qds = [wp.array(qd0, dtype=float, requires_grad=True, device=DEVICE)]
    for _ in range(steps):
        qs.append(wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE))
        qds.append(wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE))
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        for frame in range(frames):
            for s in range(frame * SUBSTEPS, (frame + 1) * SUBSTEPS):
                wp.launch(
                    step, dim=n, inputs=[qs[s], qds[s], force], outputs=[qs[s + 1], qds[s + 1]], device=DEVICE
                )
            wp.launch(
                track,
                dim=n,
                inputs=[qs[(frame + 1) * SUBSTEPS], targets[frame]],
                outputs=[loss],
                device=DEVICE,
            )
    tape.backward(loss)

    expected = central_differences(lambda f: objective_np(f, q0, qd0, targets_np), f_np)
    return {"grad": force.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
