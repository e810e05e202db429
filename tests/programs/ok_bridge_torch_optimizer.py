"""Look-alike (fine): Warp's documented PyTorch optimization loop, a torch leaf shared zero-copy.

``wp.from_torch(xs)`` of a leaf that requires grad makes the Warp gradient ``xs.grad``
itself, as in wt205_torch_leaf. Here that sharing is the point: the tape is recorded once,
each iteration zeroes it, backpropagates the Warp loss into ``xs.grad`` and lets a torch
optimizer step. Torch's autograd never adds into ``xs.grad`` (no torch backward runs): one
writer, the right gradient. WT205 stays silent.
"""
# requires-module: torch

import numpy as np
import torch
import warp as wp

wp.config.quiet = True
wp.init()  # wp.from_torch needs Warp's runtime (it does not initialize Warp itself)
DEVICE = "cpu"
N = 6


@wp.kernel
def distance_loss(xs: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = xs[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


def run() -> dict:
    target_np = np.linspace(-1.0, 1.0, N)
    xs = torch.zeros(N, dtype=torch.float32, requires_grad=True)
    opt = torch.optim.SGD([xs], lr=0.1)
    wp_xs = wp.from_torch(xs)
    target = wp.array(target_np, dtype=float, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(distance_loss, dim=N, inputs=[wp_xs, target], outputs=[loss], device=DEVICE)
    for _ in range(3):
        tape.zero()
        tape.backward(loss=loss)
        grad = xs.grad.detach().numpy().astype(np.float64).copy()
        # the expected gradient at the parameters the (single) recording saw
        x_now = xs.detach().numpy().astype(np.float64).copy()
        opt.step()
    expected = 2.0 * (x_now - target_np)
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
