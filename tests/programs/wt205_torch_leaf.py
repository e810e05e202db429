"""WT205: ``wp.from_torch(x)`` of a torch leaf inside a custom ``torch.autograd.Function``.

The function wraps its input zero-copy. ``x`` is a leaf that requires grad, so Warp's
array gets ``x.grad`` itself as its gradient (Warp allocates it and sets ``x.grad``).
The backward runs the Warp tape, which writes the gradient into that memory, and returns
``wp.to_torch(ctx.x.grad)``: torch then adds the returned gradient into ``x.grad``, the
same memory. One ``loss.backward()`` counts the gradient twice.
"""
# requires-module: torch

import numpy as np
import torch
import warp as wp

wp.config.quiet = True
wp.init()  # wp.from_torch needs Warp's runtime (it does not initialize Warp itself)
DEVICE = "cpu"
N = 4
STEPS = 3


@wp.kernel
def soft_cube(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i] * x[i] + 0.5 * x[i]


class SoftCube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = wp.from_torch(x)  # expect: WT205
        ctx.y = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
        ctx.tape = wp.Tape()
        with ctx.tape:
            wp.launch(soft_cube, dim=N, inputs=[ctx.x], outputs=[ctx.y], device=DEVICE)
        return wp.to_torch(ctx.y)

    @staticmethod
    def backward(ctx, adj_y):
        ctx.tape.backward(grads={ctx.y: wp.from_torch(adj_y.contiguous())})
        return wp.to_torch(ctx.x.grad)


def run() -> dict:
    p = torch.tensor([0.3, -0.6, 0.9, 0.2], dtype=torch.float32, requires_grad=True)
    weights = torch.tensor([1.0, -2.0, 0.5, 3.0])
    opt = torch.optim.SGD([p], lr=0.01)
    for _ in range(STEPS):
        opt.zero_grad()
        p_now = p.detach().numpy().astype(np.float64).copy()
        loss = (SoftCube.apply(p) * weights).sum()
        loss.backward()
        grad = p.grad.detach().numpy().astype(np.float64).copy()
        opt.step()
    expected = weights.numpy().astype(np.float64) * (3.0 * p_now**2 + 0.5)
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
