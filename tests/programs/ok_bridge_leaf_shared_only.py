"""Look-alike (fine): a Function that lets Warp write the leaf's ``.grad`` and returns nothing for it.

As in wt205_torch_leaf, ``wp.from_torch(x)`` of the leaf makes the Warp gradient the
leaf's own ``.grad``. This Function relies on that: its backward runs the Warp tape, which
writes the gradient there, and returns ``None`` for ``x``. A torch regularizer on the same
leaf adds its gradient through torch's autograd. Warp's part is written once, torch's once:
the sum is right. The Warp gradient is never handed back to torch, so WT205 stays silent.
"""
# requires-module: torch

import numpy as np
import torch
import warp as wp

wp.config.quiet = True
wp.init()  # wp.from_torch needs Warp's runtime (it does not initialize Warp itself)
DEVICE = "cpu"
N = 4
LAM = 0.1


@wp.kernel
def sine_field(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.sin(2.0 * x[i])


class SineField(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.x = wp.from_torch(x)
        ctx.y = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
        ctx.tape = wp.Tape()
        with ctx.tape:
            wp.launch(sine_field, dim=N, inputs=[ctx.x], outputs=[ctx.y], device=DEVICE)
        return wp.to_torch(ctx.y)

    @staticmethod
    def backward(ctx, adj_y):
        ctx.tape.backward(grads={ctx.y: wp.from_torch(adj_y.contiguous())})
        return None  # the gradient is already in x.grad: Warp wrote it there


def run() -> dict:
    p = torch.tensor([0.1, 0.5, -0.4, 1.0], dtype=torch.float32, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.05)
    for _ in range(2):
        opt.zero_grad()
        p_now = p.detach().numpy().astype(np.float64).copy()
        loss = SineField.apply(p).sum() + LAM * (p * p).sum()
        loss.backward()
        grad = p.grad.detach().numpy().astype(np.float64).copy()
        opt.step()
    expected = 2.0 * np.cos(2.0 * p_now) + 2.0 * LAM * p_now
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
