"""WT311 through ``wp.from_torch(out, grad=WEIGHTS)``: the torch weights are the output's gradient.

Each evaluation wraps a torch output buffer for Warp and hands the objective weights as
its gradient with ``grad=WEIGHTS`` (zero-copy). The adjoint of the store ``out[i] = ...``
zeroes ``out.grad``, that is ``WEIGHTS``: the first gradient is right, the next ones are
zero.
"""
# requires-module: torch

import numpy as np
import torch
import warp as wp

wp.config.quiet = True
wp.init()  # wp.from_torch needs Warp's runtime (it does not initialize Warp itself)
DEVICE = "cpu"
N = 3
OUT = torch.zeros(N, dtype=torch.float32)
WEIGHTS = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float32)


@wp.kernel
def cube(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = x[i] * x[i] * x[i]


def gradient(x_np: np.ndarray) -> np.ndarray:
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    out = wp.from_torch(OUT, grad=WEIGHTS)  # expect: WT311
    tape = wp.Tape()
    with tape:
        wp.launch(cube, dim=N, inputs=[x], outputs=[out], device=DEVICE)
    tape.backward()
    return x.grad.numpy().astype(np.float64)


def run() -> dict:
    x_np = np.array([0.5, -0.25, 0.75])
    for _ in range(2):
        x_now = x_np.copy()
        grad = gradient(x_now)
        x_np = x_now - 0.1 * grad
    expected = np.array([1.0, 2.0, 3.0]) * 3.0 * x_now * x_now
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
