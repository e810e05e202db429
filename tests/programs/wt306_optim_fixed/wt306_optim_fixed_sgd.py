"""A tiny host-side SGD optimizer: reads each parameter's ``.grad`` and updates the values."""

import numpy as np


class Sgd:
    def __init__(self, params, lr):
        self.params = params
        self.lr = lr
        self.last_grads = []

    def step(self):
        self.last_grads = []
        for p in self.params:
            g = p.grad.numpy().astype(np.float64)
            self.last_grads.append(g)
            p.assign(p.numpy() - self.lr * g)
