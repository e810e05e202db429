"""The MLP of wt301_model_fixed: hidden activations allocated with ``requires_grad=True``."""

import numpy as np
import warp as wp
import wt301_model_fixed_kernels as kernels

DEVICE = "cpu"


class Mlp:
    def __init__(self, n, weights_np):
        self.n = n
        self.weights = [wp.array(w, dtype=float, requires_grad=True, device=DEVICE) for w in weights_np]
        depth = len(weights_np) - 1
        self.acts = [wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE) for _ in range(depth)]
        self.out = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)

    def forward(self, x, y, loss):
        inp = x
        for w, act in zip(self.weights[:-1], self.acts):
            wp.launch(kernels.dense_tanh, dim=self.n, inputs=[inp, w], outputs=[act], device=DEVICE)
            inp = act
        wp.launch(
            kernels.linear, dim=self.n, inputs=[inp, self.weights[-1]], outputs=[self.out], device=DEVICE
        )
        wp.launch(kernels.mse, dim=self.n, inputs=[self.out, y], outputs=[loss], device=DEVICE)


def forward_np(weights, x, y):
    h = x
    for w in weights[:-1]:
        h = np.tanh(w[0] * h + w[1])
    pred = weights[-1][0] * h + weights[-1][1]
    return float(np.mean((pred - y) ** 2))
