"""WT302: a tape per frame with ``backward()`` inside the loop, state carried between tapes.

Each frame records its two sub-steps and its tracking loss on a new tape and
backpropagates at once, summing the frame gradients into ``force.grad``. The state
(``q``, ``qd``) is carried into the next frame's tape, which treats it as a constant:
every path by which ``force`` acts on later frames through the carried state is
dropped. The sum of per-frame gradients is not the gradient of the summed loss.
"""

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
    q0 = np.array([0.0, 0.5, -0.3])
    qd0 = np.array([0.2, 0.0, 0.1])
    f_np = np.array([1.0, -0.5, 2.0])
    targets_np = [np.array([0.1, 0.3, 0.0]) * (k + 1) for k in range(frames)]
    force = wp.array(f_np, dtype=float, requires_grad=True, device=DEVICE)
    targets = [wp.array(t, dtype=float, device=DEVICE) for t in targets_np]

    q = wp.array(q0, dtype=float, requires_grad=True, device=DEVICE)
    qd = wp.array(qd0, dtype=float, requires_grad=True, device=DEVICE)
    for frame in range(frames):
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        tape = wp.Tape()
        with tape:
            for _ in range(SUBSTEPS):
                q_next = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)
                qd_next = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)
                wp.launch(step, dim=n, inputs=[q, qd, force], outputs=[q_next, qd_next], device=DEVICE)
                q, qd = q_next, qd_next
            wp.launch(track, dim=n, inputs=[q, targets[frame]], outputs=[loss], device=DEVICE)
        tape.backward(loss)  # expect: WT302

    expected = central_differences(lambda f: objective_np(f, q0, qd0, targets_np), f_np)
    return {"grad": force.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
