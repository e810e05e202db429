"""WT102 under a hand-seeded backward: ``tape.backward(grads={y: seed})``.

A vector-Jacobian product: the program seeds the output ``y`` with a weight vector kept
in NumPy and reads ``x.grad``, which is then Jᵀ·seed, the gradient of Σ seed·y. The
program never reduces ``y`` itself (no reported objective the seed could contradict).
The bug: ``warp_in_place`` applies ``sin`` in place, so its adjoint uses ``cos(sin(u))``.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 5


@wp.kernel
def stretch(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 1.5 * x[i] + 0.2


@wp.kernel
def warp_in_place(y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.sin(y[i])


def run() -> dict:
    x0 = np.linspace(-0.8, 1.2, N)
    seed_np = np.array([1.0, -0.5, 2.0, 0.25, -1.5])
    x = wp.array(x0, dtype=float, requires_grad=True, device=DEVICE)
    y = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(stretch, dim=N, inputs=[x], outputs=[y], device=DEVICE)
        wp.launch(warp_in_place, dim=N, inputs=[y], device=DEVICE)  # expect: WT102
    tape.backward(grads={y: wp.array(seed_np, dtype=float, device=DEVICE)})
    grad = x.grad.numpy().astype(np.float64).copy()
    expected = seed_np * np.cos(1.5 * x0 + 0.2) * 1.5
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
