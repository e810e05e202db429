"""Fixed twin of wt101_seed_fill: x² and x³ live in two scratch buffers.

The program weighs every output alike, ``y.grad.fill_(2.0)``, then calls
``tape.backward()``: the gradient read is that of Σ 2·y (it never reduces ``y``
itself, so there is no other objective to compare with). gradcheck measures the gradient of
Σ 2·y and must agree.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 4


@wp.kernel
def square(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = x[i] * x[i]


@wp.kernel
def cube(x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = x[i] * x[i] * x[i]


@wp.kernel
def scale(tmp: wp.array(dtype=float), w: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = tmp[i] * w[i]


@wp.kernel
def combine(a: wp.array(dtype=float), b: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = a[i] + b[i]


def run() -> dict:
    x0 = np.array([0.5, 1.2, 0.8, 1.5])
    w0 = np.array([1.0, -0.5, 0.7, 0.3])
    x = wp.array(x0, dtype=float, device=DEVICE)
    w = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
    tmp = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    cubes = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    scaled = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    y = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=N, inputs=[x], outputs=[tmp], device=DEVICE)
        wp.launch(scale, dim=N, inputs=[tmp, w], outputs=[scaled], device=DEVICE)
        wp.launch(cube, dim=N, inputs=[x], outputs=[cubes], device=DEVICE)
        wp.launch(combine, dim=N, inputs=[cubes, scaled], outputs=[y], device=DEVICE)
    y.grad.fill_(2.0)
    tape.backward()
    grad = w.grad.numpy().astype(np.float64).copy()
    return {"grad": grad, "expected": 2.0 * x0 * x0}


if __name__ == "__main__":
    run()
