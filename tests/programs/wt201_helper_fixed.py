"""WT201 fixed twin of wt201_helper: ``encode(net)`` is called once per tape.

The net keeps ``retain_grad=True`` on ``net.code`` for inspection; with one write it is harmless.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def encode_kernel(x: wp.array(dtype=wp.vec2), weights: wp.array(dtype=wp.vec2), code: wp.array(dtype=float)):
    i = wp.tid()
    code[i] = wp.sin(wp.dot(x[i], weights[i]))


@wp.kernel
def decode_loss(code: wp.array(dtype=float), gain: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    r = gain[0] * code[i] - 0.25
    wp.atomic_add(loss, 0, r * r)


class Net:
    def __init__(self, x_np, w_np):
        n = len(x_np)
        self.n = n
        self.x = wp.array(x_np, dtype=wp.vec2, device=DEVICE)
        self.weights = wp.array(w_np, dtype=wp.vec2, requires_grad=True, device=DEVICE)
        self.gain = wp.array([1.5], dtype=float, requires_grad=True, device=DEVICE)
        self.code = wp.zeros(n, dtype=float, requires_grad=True, retain_grad=True, device=DEVICE)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)


def encode(net):
    wp.launch(encode_kernel, net.n, [net.x, net.weights], [net.code], device=DEVICE)


def decode(net):
    wp.launch(decode_loss, dim=net.n, inputs=[net.code, net.gain], outputs=[net.loss], device=DEVICE)


def run() -> dict:
    x_np = np.array([[0.5, 1.0], [-0.3, 0.8], [1.2, -0.4], [0.1, 0.1]])
    w_np = np.array([[0.7, -0.2], [1.1, 0.4], [0.3, 0.9], [-0.5, 1.3]])
    net = Net(x_np, w_np)

    tape = wp.Tape()
    with tape:
        encode(net)
        decode(net)
    tape.backward(net.loss)

    s = np.sum(x_np * w_np, axis=1)
    r = 1.5 * np.sin(s) - 0.25
    expected = (2.0 * r * 1.5 * np.cos(s))[:, None] * x_np
    return {"grad": net.weights.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
