"""WT203 across the PyTorch bridge: an ``autograd.Function`` whose Warp gradient is never zeroed.

The function keeps persistent Warp buffers between calls and a zero-copy torch view of
the input's Warp gradient (``wp.to_torch(x.grad)``), made once. Each forward copies the
torch input into the Warp buffer (``wp.from_torch``) and records a new tape; each
backward seeds the output's gradient and backpropagates, and hands torch a clone of the
view. Nothing zeroes ``x.grad`` between calls, so every call returns the sum of all
previous gradients; torch's optimizer, which zeroes its own ``.grad``, never notices.
"""
# requires-module: torch

import numpy as np
import torch
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
N = 3
STEPS = 3


@wp.kernel
def soft_square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i] + wp.sin(x[i])


class Buffers:
    """The persistent Warp side of the bridge."""

    def __init__(self):
        self.x = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
        self.y = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
        self.x_grad_torch = wp.to_torch(self.x.grad)
        self.tape = None


class WarpSoftSquare(torch.autograd.Function):
    buffers = None  # made once, by the first training run

    @staticmethod
    def forward(ctx, x):
        b = WarpSoftSquare.buffers
        wp.copy(b.x, wp.from_torch(x.detach().contiguous()))
        b.tape = wp.Tape()
        with b.tape:
            wp.launch(soft_square, dim=N, inputs=[b.x], outputs=[b.y], device=DEVICE)
        return wp.to_torch(b.y).clone()

    @staticmethod
    def backward(ctx, adj_y):
        b = WarpSoftSquare.buffers
        b.y.grad.assign(wp.from_torch(adj_y.contiguous()))
        b.tape.backward()  # expect: WT203
        return b.x_grad_torch.clone()


def run() -> dict:
    p = torch.tensor([0.4, -0.7, 1.1], dtype=torch.float32, requires_grad=True)
    weights = torch.tensor([1.0, 2.0, -0.5])
    opt = torch.optim.SGD([p], lr=0.05)
    WarpSoftSquare.buffers = Buffers()
    for _ in range(STEPS):
        p_now = p.detach().numpy().astype(np.float64).copy()
        loss = (WarpSoftSquare.apply(p) * weights).sum()
        opt.zero_grad()
        loss.backward()
        grad = p.grad.detach().numpy().astype(np.float64).copy()
        opt.step()
    expected = weights.numpy().astype(np.float64) * (2.0 * p_now + np.cos(p_now))
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
