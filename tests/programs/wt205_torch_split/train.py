"""WT205 across modules: the Warp layer's ``bind`` method wraps the torch leaf zero-copy.

``wt205_torch_split_layer.py`` holds a class that wraps the autograd Function's input with
``wp.from_torch(x)``; ``x`` is the leaf being trained, so the Warp gradient is ``x.grad``
itself. The Function's backward returns ``wp.to_torch(self.x.grad)``, and torch adds it into
the memory Warp's adjoint already wrote: each gradient is twice the true one.
"""
# requires-module: torch

import numpy as np
import torch
import warp as wp
from wt205_torch_split_layer import LayerFunction, WarpLayer

wp.config.quiet = True
wp.init()  # wp.from_torch needs Warp's runtime (it does not initialize Warp itself)
N = 5
STEPS = 2


def run() -> dict:
    scale = np.array([1.0, 0.5, -2.0, 1.5, 0.25])
    layer = WarpLayer(scale)
    p = torch.tensor([0.4, -1.2, 0.7, 0.1, -0.3], dtype=torch.float32, requires_grad=True)
    opt = torch.optim.Adam([p], lr=0.01)
    for _ in range(STEPS):
        opt.zero_grad()
        p_now = p.detach().numpy().astype(np.float64).copy()
        LayerFunction.apply(p, layer).sum().backward()
        grad = p.grad.detach().numpy().astype(np.float64).copy()
        opt.step()
    expected = scale * p_now / np.sqrt(p_now * p_now + 0.25)
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
