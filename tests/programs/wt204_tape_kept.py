"""WT204: a gradient-descent loop that keeps one tape and never resets it.

The tape is made once, before the loop; each iteration zeroes the loss, records the
forward on the tape, backpropagates, updates ``w`` and zeroes the gradients with
``tape.zero()``, but there is no ``tape.reset()``. The tape keeps every earlier
iteration's launches, and each backward replays them all: the loss's gradient flows
into every recorded ``mse`` launch, and ``w.grad`` at iteration k sums the gradients of
the k forwards recorded so far (each replayed on what memory holds now). The
returned gradient is the one the last update used.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
LR = 0.05


@wp.kernel
def predict(x: wp.array(dtype=float), w: wp.array(dtype=float), pred: wp.array(dtype=float)):
    i = wp.tid()
    pred[i] = w[0] * x[i] + w[1] * x[i] * x[i]


@wp.kernel
def mse(pred: wp.array(dtype=float), y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = pred[i] - y[i]
    wp.atomic_add(loss, 0, d * d / float(pred.shape[0]))


@wp.kernel
def sgd(w: wp.array(dtype=float), grad: wp.array(dtype=float)):
    i = wp.tid()
    w[i] = w[i] - LR * grad[i]


def true_grad(w_np, x_np, y_np):
    d = w_np[0] * x_np + w_np[1] * x_np**2 - y_np
    return np.array([np.mean(2.0 * d * x_np), np.mean(2.0 * d * x_np**2)])


def run() -> dict:
    n, iters = 8, 4
    x_np = np.linspace(-1.0, 1.0, n)
    y_np = 0.5 * x_np - 1.5 * x_np**2
    x = wp.array(x_np, dtype=float, device=DEVICE)
    y = wp.array(y_np, dtype=float, device=DEVICE)
    w = wp.array([1.0, 1.0], dtype=float, requires_grad=True, device=DEVICE)
    pred = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()

    for _ in range(iters):
        loss.zero_()
        with tape:
            wp.launch(predict, dim=n, inputs=[x, w], outputs=[pred], device=DEVICE)
            wp.launch(mse, dim=n, inputs=[pred, y], outputs=[loss], device=DEVICE)
        tape.backward(loss)  # expect: WT204
        used = w.grad.numpy().copy()
        expected = true_grad(w.numpy().astype(np.float64), x_np, y_np)
        wp.launch(sgd, dim=2, inputs=[w, w.grad], device=DEVICE)
        tape.zero()

    return {"grad": used, "expected": expected}


if __name__ == "__main__":
    run()
