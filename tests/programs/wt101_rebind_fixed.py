"""Fixed twin of wt101_rebind: each frame gets fresh substep buffers after the carried state."""

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
        wp.launch(substep, dim=N, inputs=[states[s], w], outputs=[states[s + 1]], device=DEVICE)


def run() -> dict:
    x0 = np.array([0.8, -0.6, 1.2])
    w0 = np.array([1.5, -2.0, 0.7])

    w = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
    carried = wp.array(x0, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        for _frame in range(FRAMES):
            states = [carried] + [
                wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(SUBSTEPS)
            ]
            simulate_frame(states, w)
            carried = states[-1]
        wp.launch(sum_squares, dim=N, inputs=[carried], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = central_differences(lambda ww: reference_loss(ww, x0), w0)
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
