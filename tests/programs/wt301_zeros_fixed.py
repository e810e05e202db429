"""WT301 fixed twin: the intermediate is allocated with ``requires_grad=True``."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def lift(x: wp.array(dtype=float), w1: wp.array(dtype=float), hidden: wp.array(dtype=float)):
    i = wp.tid()
    hidden[i] = wp.tanh(w1[i] * x[i])


@wp.kernel
def readout(hidden: wp.array(dtype=float), w2: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = w2[i] * hidden[i]


@wp.kernel
def sq_error(out: wp.array(dtype=float), y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = out[i] - y[i]
    wp.atomic_add(loss, 0, d * d)


def run() -> dict:
    n = 4
    x_np = np.array([0.5, -1.0, 1.5, 0.2])
    w1_np = np.array([1.0, 0.5, -0.8, 2.0])
    w2_np = np.array([0.7, -1.2, 1.1, 0.4])
    y_np = np.array([1.0, 0.0, -0.5, 0.3])
    x = wp.array(x_np, dtype=float, device=DEVICE)
    w1 = wp.array(w1_np, dtype=float, requires_grad=True, device=DEVICE)
    w2 = wp.array(w2_np, dtype=float, requires_grad=True, device=DEVICE)
    y = wp.array(y_np, dtype=float, device=DEVICE)
    hidden = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)
    out = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(lift, dim=n, inputs=[x, w1], outputs=[hidden], device=DEVICE)
        wp.launch(readout, dim=n, inputs=[hidden, w2], outputs=[out], device=DEVICE)
        wp.launch(sq_error, dim=n, inputs=[out, y], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    h = np.tanh(w1_np * x_np)
    d = w2_np * h - y_np
    expected = 2.0 * d * w2_np * (1.0 - h * h) * x_np
    return {"grad": w1.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
