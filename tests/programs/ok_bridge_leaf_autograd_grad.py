"""Look-alike (fine): wt205_torch_leaf's Function, differentiated with ``torch.autograd.grad``.

The Function imports the leaf zero-copy and returns ``wp.to_torch(ctx.x.grad)``, as in
wt205_torch_leaf. ``torch.autograd.grad`` returns the gradients instead of accumulating them
into ``.grad``: torch never adds into the memory Warp wrote, and the returned gradient is
right. WT205 stays silent: torch's autograd accumulated nothing.
"""
# requires-module: torch

import numpy as np
import torch
import warp as wp

wp.config.quiet = True
wp.init()  # wp.from_torch needs Warp's runtime (it does not initialize Warp itself)
DEVICE = "cpu"
N = 3


@wp.kernel
def logistic(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 1.0 / (1.0 + wp.exp(-x[i]))


class Logistic(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = wp.from_torch(x)
        ctx.y = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
        ctx.tape = wp.Tape()
        with ctx.tape:
            wp.launch(logistic, dim=N, inputs=[ctx.x], outputs=[ctx.y], device=DEVICE)
        return wp.to_torch(ctx.y)

    @staticmethod
    def backward(ctx, adj_y):
        ctx.tape.backward(grads={ctx.y: wp.from_torch(adj_y.contiguous())})
        return wp.to_torch(ctx.x.grad)


def run() -> dict:
    p = torch.tensor([0.3, -1.0, 2.0], dtype=torch.float32, requires_grad=True)
    weights = torch.tensor([1.0, 0.5, -1.5])
    (grad,) = torch.autograd.grad((Logistic.apply(p) * weights).sum(), p)
    s = 1.0 / (1.0 + np.exp(-p.detach().numpy().astype(np.float64)))
    expected = weights.numpy().astype(np.float64) * s * (1.0 - s)
    return {"grad": grad.detach().numpy().astype(np.float64), "expected": expected}


if __name__ == "__main__":
    run()
