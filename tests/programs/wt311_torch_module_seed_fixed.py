"""Fixed twin of wt311_torch_module_seed: the seed is handed to the backward as a copy.

``tape.backward(grads={y: wp.from_torch(SEED)})`` with ``y`` allocated with
``requires_grad=True`` copies the seed into ``y.grad``: the store adjoint consumes that copy,
and ``SEED`` keeps its ones for the next evaluation.
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
    tape.backward(grads={y: wp.from_torch(SEED)})
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
