"""WT101: ``states[0] = states[-1]`` between frames makes two "different" states one object.

Each frame runs two substeps through ``states[0] -> states[1] -> states[2]`` and then
carries the last state into the next frame by rebinding ``states[0]``. From frame two on
``states[0]`` *is* ``states[2]``, so every substep writes a buffer an earlier launch of
the same tape read.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 3
FRAMES = 3
SUBSTEPS = 2
DT = 0.2


@wp.kernel
def substep(x: wp.array(dtype=float), w: wp.array(dtype=float), x_next: wp.array(dtype=float)):
    i = wp.tid()
    x_next[i] = x[i] + DT * wp.tanh(w[i] * x[i] * x[i])


@wp.kernel
def sum_squares(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


def reference_loss(w, x0):
    x = x0.astype(np.float64)
    for _ in range(FRAMES * SUBSTEPS):
        x = x + DT * np.tanh(w * x * x)
    return np.sum(x * x)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def simulate_frame(states, w):
    for s in range(SUBSTEPS):
        src, dst = states[s], states[s + 1]
        wp.launch(substep, dim=N, inputs=[src, w], outputs=[dst], device=DEVICE)  # expect: WT101


def run() -> dict:
    x0 = np.array([0.8, -0.6, 1.2])
    w0 = np.array([1.5, -2.0, 0.7])

    w = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
    states = [wp.array(x0, dtype=float, requires_grad=True, device=DEVICE)]
    states += [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(SUBSTEPS)]
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        for _frame in range(FRAMES):
            simulate_frame(states, w)
            states[0] = states[-1]
        wp.launch(sum_squares, dim=N, inputs=[states[-1]], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = central_differences(lambda ww: reference_loss(ww, x0), w0)
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
