"""WT311: a module-level torch seed installed zero-copy as ``y.grad``, zeroed by the first backward.

Each evaluation records the forward on a tape, installs the module's ``SEED`` tensor as the
output's gradient with ``y.grad = wp.from_torch(SEED)`` and backpropagates. The adjoint of
the plain store ``y[i] = ...`` consumes the output gradient: it zeroes ``y.grad[i]`` after
reading it, and ``y.grad`` is ``SEED``'s memory. The first evaluation is right; every later
one starts from zeros and returns a zero gradient, so the descent loop stops moving.
"""
# requires-module: torch

import numpy as np
import torch
import warp as wp

wp.config.quiet = True
wp.init()  # wp.from_torch needs Warp's runtime (it does not initialize Warp itself)
DEVICE = "cpu"
N = 5
SEED = torch.ones(N, dtype=torch.float32)


@wp.kernel
def energy(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.sin(x[i]) * x[i]


def gradient(x_np: np.ndarray) -> np.ndarray:
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    y = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(energy, dim=N, inputs=[x], outputs=[y], device=DEVICE)
    y.grad = wp.from_torch(SEED)  # expect: WT311
    tape.backward()
    return x.grad.numpy().astype(np.float64)


def run() -> dict:
    x_np = np.linspace(0.2, 1.4, N)
    for _ in range(3):
        x_now = x_np.copy()
        grad = gradient(x_now)
        x_np = x_now - 0.05 * grad
    expected = np.cos(x_now) * x_now + np.sin(x_now)
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
