"""A tiny MLP whose hidden activations are held in a list, allocated without gradients.

The weights are ``requires_grad`` arrays; the activation list is built with bare
``wp.zeros``, so every hidden activation cuts the chain: only the last layer's weights
get a gradient, the hidden layers' are exactly zero.
"""

import numpy as np
import warp as wp
import wt301_model_kernels as kernels

DEVICE = "cpu"


class Mlp:
    def __init__(self, n, weights_np):
        self.n = n
        self.weights = [wp.array(w, dtype=float, requires_grad=True, device=DEVICE) for w in weights_np]
        depth = len(weights_np) - 1
        self.acts = [wp.zeros(n, dtype=float, device=DEVICE) for _ in range(depth)]  # expect: WT301
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
