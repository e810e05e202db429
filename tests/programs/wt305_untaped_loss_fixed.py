"""WT305 fixed twin: the loss reduction is recorded inside ``with tape:``."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def predict(x: wp.array(dtype=float), coeffs: wp.array(dtype=float), pred: wp.array(dtype=float)):
    i = wp.tid()
    pred[i] = coeffs[0] + coeffs[1] * x[i] + coeffs[2] * x[i] * x[i]


@wp.kernel
def residual(pred: wp.array(dtype=float), y: wp.array(dtype=float), res: wp.array(dtype=float)):
    i = wp.tid()
    res[i] = pred[i] - y[i]


@wp.kernel
def mean_square(res: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, res[i] * res[i] / float(res.shape[0]))


def run() -> dict:
    n = 6
    x_np = np.linspace(-1.0, 2.0, n)
    y_np = np.exp(0.5 * x_np)
    c_np = np.array([1.0, 0.2, 0.1])
    x = wp.array(x_np, dtype=float, device=DEVICE)
    y = wp.array(y_np, dtype=float, device=DEVICE)
    coeffs = wp.array(c_np, dtype=float, requires_grad=True, device=DEVICE)
    pred = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)
    res = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(predict, dim=n, inputs=[x, coeffs], outputs=[pred], device=DEVICE)
        wp.launch(residual, dim=n, inputs=[pred, y], outputs=[res], device=DEVICE)
        wp.launch(mean_square, dim=n, inputs=[res], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    r = c_np[0] + c_np[1] * x_np + c_np[2] * x_np**2 - y_np
    expected = np.array([np.mean(2.0 * r), np.mean(2.0 * r * x_np), np.mean(2.0 * r * x_np**2)])
    return {"grad": coeffs.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
