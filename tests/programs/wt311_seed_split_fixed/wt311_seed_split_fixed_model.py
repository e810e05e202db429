"""A small model whose objective weights are a seed buffer made once, in the constructor."""

import numpy as np
import warp as wp

DEVICE = "cpu"


@wp.func
def response(k: float, x: float):
    return k * x * x + wp.sin(k)


@wp.kernel
def predict(k: wp.array(dtype=float), x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = response(k[0], x[i])


class Model:
    def __init__(self, xs: np.ndarray, weights: np.ndarray):
        self.x = wp.array(xs, dtype=float, device=DEVICE)
        self.seed = wp.array(weights, dtype=float, device=DEVICE)  # the objective's weights

    def gradient(self, k_value: float) -> float:
        k = wp.array([k_value], dtype=float, requires_grad=True, device=DEVICE)
        out = wp.zeros(self.x.shape[0], dtype=float, requires_grad=True, device=DEVICE)
        tape = wp.Tape()
        with tape:
            wp.launch(predict, dim=self.x.shape[0], inputs=[k, self.x], outputs=[out], device=DEVICE)
        out.grad.assign(self.seed)
        tape.backward()
        return float(k.grad.numpy()[0])
