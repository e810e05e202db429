"""Fixed twin of wt301_torch_optimizer: the intermediate ``h`` has a gradient.

The parameter is a torch tensor; ``x = wp.from_torch(x_t)`` wraps it once, and its Warp
gradient is the torch tensor's ``.grad``: ``opt.step()`` reads it out of Warp's sight,
and ``tape.zero()`` clears it (the shape of Warp's PyTorch interop example). Every read
must agree, although no read is visible in the recording (torch reads the gradient after
each backward).
"""
# requires-module: torch

import numpy as np
import torch
import warp as wp

wp.config.quiet = True
wp.init()

DEVICE = "cpu"
N = 4
ITERS = 3
LR = 0.05


@wp.kernel
def features(x: wp.array(dtype=float), h: wp.array(dtype=float)):
    i = wp.tid()
    h[i] = wp.sin(x[i])


@wp.kernel
def mix(x: wp.array(dtype=float), h: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * h[i] + 0.5 * x[i] * x[i]


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i])


def run() -> dict:
    x_t = torch.tensor([0.3, -0.6, 1.1, 0.8], dtype=torch.float32, requires_grad=True)
    opt = torch.optim.SGD([x_t], lr=LR)
    x = wp.from_torch(x_t)
    grads, expected = [], []
    for _ in range(ITERS):
        h = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
        y = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        tape = wp.Tape()
        with tape:
            wp.launch(features, dim=N, inputs=[x], outputs=[h], device=DEVICE)
            wp.launch(mix, dim=N, inputs=[x, h], outputs=[y], device=DEVICE)
            wp.launch(total, dim=N, inputs=[y], outputs=[loss], device=DEVICE)
        tape.backward(loss)
        x_now = x_t.detach().numpy().astype(np.float64)
        expected.append(np.sin(x_now) + x_now * np.cos(x_now) + x_now)
        grads.append(x_t.grad.numpy().astype(np.float64).copy())
        opt.step()
        tape.zero()  # clears x.grad, which is x_t.grad
    return {"grad": np.concatenate(grads), "expected": np.concatenate(expected)}


if __name__ == "__main__":
    run()
