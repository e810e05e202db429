"""Look-alike (fine): the gradient is projected in place before it is read and used.

After each backward, ``project`` removes the component of the gradient along a fixed
direction, storing into ``x.grad`` what it read from it (``g[i] = g[i] - d[i] * dot``): a
transformation of the current gradient, not a clear. The program then reads the
projected gradient with ``numpy()`` and takes its step from it, and zeroes the gradient
with ``tape.zero()`` only after the step.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 3
STEPS = 2
LR = 0.1


@wp.kernel
def energy(x: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def project(g: wp.array(dtype=float), direction: wp.array(dtype=float), along: float):
    i = wp.tid()
    g[i] = g[i] - direction[i] * along


def run() -> dict:
    x0 = np.array([0.5, -1.0, 2.0])
    t0 = np.array([1.0, 1.0, 1.0])
    d0 = np.array([1.0, 0.0, 0.0])

    x = wp.array(x0, dtype=float, requires_grad=True, device=DEVICE)
    target = wp.array(t0, dtype=float, device=DEVICE)
    direction = wp.array(d0, dtype=float, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    x_np = x0.copy()
    grad = np.zeros(N)
    for _ in range(STEPS):
        loss.zero_()
        with tape:
            wp.launch(energy, dim=N, inputs=[x, target], outputs=[loss], device=DEVICE)
        tape.backward(loss)
        along = float(np.dot(x.grad.numpy(), d0))
        wp.launch(project, dim=N, inputs=[x.grad, direction, along], device=DEVICE)
        grad = x.grad.numpy().copy()
        x_np = x_np - LR * grad
        x.assign(x_np)
        tape.zero()
        tape.reset()

    # the projected gradient of the last step, at the parameters before that step
    before_last = x_np + LR * grad
    expected = 2.0 * (before_last - t0) * (1.0 - d0)
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
