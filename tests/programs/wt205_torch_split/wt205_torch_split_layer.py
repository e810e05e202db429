"""A torch layer backed by Warp: the Warp buffers live in a class, the autograd Function uses it."""

import torch
import warp as wp
from wt205_torch_split_kernels import layer_kernel

DEVICE = "cpu"


class WarpLayer:
    def __init__(self, scale):
        self.scale = wp.array(scale, dtype=float, device=DEVICE)
        self.tape = None

    def bind(self, x):
        self.x = wp.from_torch(x)  # expect: WT205
        self.y = wp.zeros(self.x.shape[0], dtype=float, requires_grad=True, device=DEVICE)

    def forward(self):
        self.tape = wp.Tape()
        with self.tape:
            wp.launch(
                layer_kernel,
                dim=self.x.shape[0],
                inputs=[self.x, self.scale],
                outputs=[self.y],
                device=DEVICE,
            )
        return wp.to_torch(self.y)

    def backward(self, adj_y):
        self.tape.backward(grads={self.y: wp.from_torch(adj_y.contiguous())})
        return wp.to_torch(self.x.grad)


class LayerFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, layer):
        ctx.layer = layer
        layer.bind(x)
        return layer.forward()

    @staticmethod
    def backward(ctx, adj_y):
        return ctx.layer.backward(adj_y), None
