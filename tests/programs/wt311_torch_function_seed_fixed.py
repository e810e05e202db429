"""Fixed twin of wt311_torch_function_seed: the Function hands ``grad_output`` over as a copy.

``ctx.tape.backward(grads={ctx.y: wp.from_torch(adj_y)})`` copies the incoming gradient into
``ctx.y.grad`` (``ctx.y`` has its own gradient): the store adjoint consumes the copy, and the
caller's ``WEIGHTS`` keep their values for the next step.
"""
# requires-module: torch

import numpy as np
import torch
import warp as wp

wp.config.quiet = True
wp.init()  # wp.from_torch needs Warp's runtime (it does not initialize Warp itself)
DEVICE = "cpu"
N = 4
WEIGHTS = torch.tensor([1.0, -0.5, 2.0, 0.25], dtype=torch.float32)


@wp.func
def bump(v: float):
    return v * wp.exp(-v * v)


@wp.kernel
def bump_kernel(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = bump(x[i])


class Bump(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = wp.from_torch(x.detach(), requires_grad=True)
        ctx.y = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
        ctx.tape = wp.Tape()
        with ctx.tape:
            wp.launch(bump_kernel, dim=N, inputs=[ctx.x], outputs=[ctx.y], device=DEVICE)
        return wp.to_torch(ctx.y).clone()

    @staticmethod
    def backward(ctx, adj_y):
        ctx.tape.backward(grads={ctx.y: wp.from_torch(adj_y)})
        return wp.to_torch(ctx.x.grad).clone()


def run() -> dict:
    p = torch.tensor([0.2, -0.7, 1.1, 0.5], dtype=torch.float32, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        p_now = p.detach().numpy().astype(np.float64).copy()
        Bump.apply(p).backward(WEIGHTS)
        grad = p.grad.detach().numpy().astype(np.float64).copy()
        opt.step()
    w = np.array([1.0, -0.5, 2.0, 0.25])
    expected = w * (1.0 - 2.0 * p_now * p_now) * np.exp(-p_now * p_now)
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
