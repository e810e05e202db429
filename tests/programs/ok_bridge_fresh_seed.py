"""Look-alike (fine): a Function installs torch's ``grad_output`` as ``y.grad``, a fresh one each call.

The Function's backward installs the incoming gradient zero-copy as the Warp output's
gradient, as in wt311_torch_function_seed, and the store adjoint zeroes it. Here each
``loss.backward()`` hands the Function a new gradient tensor, so no backward starts from a
consumed seed. WT311 stays silent.
"""
# requires-module: torch

import numpy as np
import torch
import warp as wp

wp.config.quiet = True
wp.init()  # wp.from_torch needs Warp's runtime (it does not initialize Warp itself)
DEVICE = "cpu"
N = 4


@wp.kernel
def softplus(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.log(1.0 + wp.exp(x[i]))


class Softplus(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = wp.from_torch(x.detach(), requires_grad=True)
        ctx.y = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
        ctx.tape = wp.Tape()
        with ctx.tape:
            wp.launch(softplus, dim=N, inputs=[ctx.x], outputs=[ctx.y], device=DEVICE)
        return wp.to_torch(ctx.y).clone()

    @staticmethod
    def backward(ctx, adj_y):
        ctx.y.grad = wp.from_torch(adj_y.contiguous())
        ctx.tape.backward()
        return wp.to_torch(ctx.x.grad).clone()


def run() -> dict:
    p = torch.tensor([0.5, -1.5, 2.0, 0.0], dtype=torch.float32, requires_grad=True)
    weights = torch.tensor([1.0, 3.0, -0.5, 2.0])
    opt = torch.optim.SGD([p], lr=0.05)
    for _ in range(3):
        opt.zero_grad()
        p_now = p.detach().numpy().astype(np.float64).copy()
        (Softplus.apply(p) * weights).sum().backward()
        grad = p.grad.detach().numpy().astype(np.float64).copy()
        opt.step()
    expected = weights.numpy().astype(np.float64) / (1.0 + np.exp(-p_now))
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
