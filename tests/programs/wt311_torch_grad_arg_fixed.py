"""Fixed twin of wt311_torch_grad_arg: the weights are handed to the backward as a copy.

``out`` gets a gradient buffer of its own (``requires_grad=True``) and
``tape.backward(grads={out: wp.from_torch(WEIGHTS)})`` copies the weights into it: the store
adjoint zeroes the copy, and ``WEIGHTS`` keeps its values. (``grad=WEIGHTS.clone()`` per call
works too.)
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
    out = wp.from_torch(OUT, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(cube, dim=N, inputs=[x], outputs=[out], device=DEVICE)
    tape.backward(grads={out: wp.from_torch(WEIGHTS)})
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
