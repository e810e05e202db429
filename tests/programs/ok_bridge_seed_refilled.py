"""Look-alike (fine): a module-level torch seed installed as ``y.grad`` and refilled before each use.

As in wt311_torch_module_seed, ``y.grad = wp.from_torch(SEED)`` shares the seed with Warp
and the store adjoint zeroes it. Here each evaluation refills ``SEED`` with torch
(``SEED.fill_(1.0)``) before installing it: torch's version counter moves, the recorder
sees it, and WT311 stays silent.
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
    y[i] = wp.cos(x[i]) * x[i] * x[i]


def gradient(x_np: np.ndarray) -> np.ndarray:
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    y = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(energy, dim=N, inputs=[x], outputs=[y], device=DEVICE)
    SEED.fill_(1.0)  # the backward below zeroes it
    y.grad = wp.from_torch(SEED)
    tape.backward()
    return x.grad.numpy().astype(np.float64)


def run() -> dict:
    x_np = np.linspace(0.2, 1.4, N)
    for _ in range(3):
        x_now = x_np.copy()
        grad = gradient(x_now)
        x_np = x_now - 0.05 * grad
    expected = 2.0 * x_now * np.cos(x_now) - x_now * x_now * np.sin(x_now)
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
