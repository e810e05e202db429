"""Model state of the wt203_split_fixed program: parameters held in a list, activations in an object."""

import numpy as np
import warp as wp

DEVICE = "cpu"


class Model:
    def __init__(self, n):
        self.n = n
        self.params = [
            wp.array([0.8, 0.1], dtype=float, requires_grad=True, device=DEVICE),
            wp.array([1.2, -0.2], dtype=float, requires_grad=True, device=DEVICE),
        ]
        self.h = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)
        self.pred = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)

    def numpy_params(self):
        return [p.numpy().astype(np.float64) for p in self.params]


def forward_np(params, x):
    w1, w2 = params
    return w2[0] * np.tanh(w1[0] * x + w1[1]) + w2[1]
