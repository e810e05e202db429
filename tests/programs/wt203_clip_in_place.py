"""WT203: a training loop that clips the gradient in place but never zeroes it.

After each backward the gradient is clipped in place (``g[i] = wp.clamp(g[i], -C, C)``)
and used for the update, but nothing zeroes it: a clip stores into the gradient what it
read from it, so the buffer still holds this iteration's (clipped) gradient, and the
next ``tape.backward`` adds onto it. From the second iteration on the optimizer is fed a
running sum of clipped past gradients.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
LR = 0.05
CLIP = 2.0


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
def clip(g: wp.array(dtype=float)):
    i = wp.tid()
    g[i] = wp.clamp(g[i], -CLIP, CLIP)


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

    for _ in range(iters):
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        tape = wp.Tape()
        with tape:
            wp.launch(predict, dim=n, inputs=[x, w], outputs=[pred], device=DEVICE)
            wp.launch(mse, dim=n, inputs=[pred, y], outputs=[loss], device=DEVICE)
        tape.backward(loss)  # expect: WT203
        wp.launch(clip, dim=2, inputs=[w.grad], device=DEVICE)
        used = w.grad.numpy().copy()
        expected = np.clip(true_grad(w.numpy().astype(np.float64), x_np, y_np), -CLIP, CLIP)
        wp.launch(sgd, dim=2, inputs=[w, w.grad], device=DEVICE)

    return {"grad": used, "expected": expected}


if __name__ == "__main__":
    run()
