"""WT101: ``guess.assign(solution)`` warm-starts the next iteration in place.

A fixed number of Newton iterations for ``x**3 = w`` run on the tape. Every iteration
reads ``guess`` and the solution is assigned back into it, so the adjoint of every
iteration sees the final iterate instead of the one it started from.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 3
ITERS = 3


@wp.kernel
def newton_step(guess: wp.array(dtype=float), w: wp.array(dtype=float), solution: wp.array(dtype=float)):
    i = wp.tid()
    x = guess[i]
    solution[i] = x - (x * x * x - w[i]) / (3.0 * x * x)


@wp.kernel
def sum_squares(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


def reference_loss(w, x0):
    x = x0.astype(np.float64)
    for _ in range(ITERS):
        x = x - (x**3 - w) / (3.0 * x * x)
    return np.sum(x * x)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    x0 = np.array([1.0, 1.0, 1.0])
    w0 = np.array([6.0, 10.0, 3.0])

    w = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
    guess = wp.array(x0, dtype=float, requires_grad=True, device=DEVICE)
    solutions = [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(ITERS)]
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        for it in range(ITERS):
            wp.launch(newton_step, dim=N, inputs=[guess, w], outputs=[solutions[it]], device=DEVICE)
            guess.assign(solutions[it])  # expect: WT101
        wp.launch(sum_squares, dim=N, inputs=[guess], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = central_differences(lambda ww: reference_loss(ww, x0), w0)
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
