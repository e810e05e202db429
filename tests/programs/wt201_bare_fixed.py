"""WT201 fixed twin of wt201_bare: ``relu_layer`` recorded once."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def relu_layer(
    x: wp.array(dtype=float), w: wp.array(dtype=float), b: wp.array(dtype=float), h: wp.array(dtype=float)
):
    i = wp.tid()
    h[i] = wp.max(x[i] * w[i] + b[i], 0.0)


@wp.kernel
def weighted_sum(h: wp.array(dtype=float), c: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, c[i] * h[i] * h[i])


def run() -> dict:
    n = 5
    x_np = np.array([0.5, -1.0, 1.5, 2.0, -0.25])
    w_np = np.array([1.2, 0.7, -0.4, 0.9, 1.1])
    b_np = np.array([0.1, 1.0, 0.9, -0.3, 0.6])
    c_np = np.array([1.0, 2.0, 0.5, 1.5, -1.0])
    x = wp.array(x_np, dtype=float, device=DEVICE)
    w = wp.array(w_np, dtype=float, requires_grad=True, device=DEVICE)
    b = wp.array(b_np, dtype=float, requires_grad=True, device=DEVICE)
    c = wp.array(c_np, dtype=float, device=DEVICE)
    h = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(relu_layer, dim=n, inputs=[x, w, b], outputs=[h], device=DEVICE)
        wp.launch(weighted_sum, dim=n, inputs=[h, c], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    pre = x_np * w_np + b_np
    h_np = np.maximum(pre, 0.0)
    expected = 2.0 * c_np * h_np * (pre > 0.0) * x_np
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
