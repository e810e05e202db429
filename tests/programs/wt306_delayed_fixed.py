"""WT306 fixed twin: zero, backward, then read the fresh gradient for the update."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
LR = 0.3


@wp.kernel
def model(
    x: wp.array(dtype=float), w: wp.array(dtype=float), y: wp.array(dtype=float), loss: wp.array(dtype=float)
):
    i = wp.tid()
    d = w[0] * wp.exp(w[1] * x[i]) - y[i]
    wp.atomic_add(loss, 0, d * d / float(x.shape[0]))


def true_grad(w_np, x_np, y_np):
    e = np.exp(w_np[1] * x_np)
    d = w_np[0] * e - y_np
    return np.array([np.mean(2.0 * d * e), np.mean(2.0 * d * w_np[0] * x_np * e)])


def run() -> dict:
    n, iters = 5, 4
    x_np = np.linspace(0.0, 1.0, n)
    y_np = 0.8 * np.exp(0.6 * x_np)
    x = wp.array(x_np, dtype=float, device=DEVICE)
    y = wp.array(y_np, dtype=float, device=DEVICE)
    w = wp.array([1.0, 0.1], dtype=float, requires_grad=True, device=DEVICE)

    for _ in range(iters):
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        tape = wp.Tape()
        with tape:
            wp.launch(model, dim=n, inputs=[x, w, y], outputs=[loss], device=DEVICE)
        w_now = w.numpy().astype(np.float64)
        w.grad.zero_()
        tape.backward(loss)
        g = w.grad.numpy().copy()
        w.assign(w_now - LR * g)

    return {"grad": g, "expected": true_grad(w_now, x_np, y_np)}


if __name__ == "__main__":
    run()
