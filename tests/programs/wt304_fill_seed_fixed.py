"""WT304 fixed twin: the mean is reduced on the tape and the backward is seeded through ``loss=``."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def residual_terms(
    x: wp.array(dtype=float), y: wp.array(dtype=float), w: wp.array(dtype=float), terms: wp.array(dtype=float)
):
    i = wp.tid()
    d = w[0] * x[i] + w[1] - y[i]
    terms[i] = d * d


@wp.kernel
def mean(terms: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, terms[i] / float(terms.shape[0]))


def run() -> dict:
    n = 8
    x_np = np.linspace(0.0, 1.0, n)
    y_np = 2.0 * x_np - 1.0 + 0.1 * np.cos(7.0 * x_np)
    w_np = np.array([0.5, 0.3])
    x = wp.array(x_np, dtype=float, device=DEVICE)
    y = wp.array(y_np, dtype=float, device=DEVICE)
    w = wp.array(w_np, dtype=float, requires_grad=True, device=DEVICE)
    terms = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(residual_terms, dim=n, inputs=[x, y, w], outputs=[terms], device=DEVICE)
        wp.launch(mean, dim=n, inputs=[terms], outputs=[loss], device=DEVICE)
    objective = float(loss.numpy()[0])
    tape.backward(loss)

    d = w_np[0] * x_np + w_np[1] - y_np
    expected = np.array([np.mean(2.0 * d * x_np), np.mean(2.0 * d)])
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
