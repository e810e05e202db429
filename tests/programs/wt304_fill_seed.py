"""WT304: a hand seed ``terms.grad.fill_(1.0)`` while the reported objective is the mean.

The per-sample errors are computed on the tape; the objective printed and optimized is
their mean, computed on the host. The backward is seeded by filling the gradient of
the 8-element ``terms`` array with ones and calling ``tape.backward()`` without a loss,
which backpropagates the *sum*: every gradient is exactly 8x too large.
"""

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


def run() -> dict:
    n = 8
    x_np = np.linspace(0.0, 1.0, n)
    y_np = 2.0 * x_np - 1.0 + 0.1 * np.cos(7.0 * x_np)
    w_np = np.array([0.5, 0.3])
    x = wp.array(x_np, dtype=float, device=DEVICE)
    y = wp.array(y_np, dtype=float, device=DEVICE)
    w = wp.array(w_np, dtype=float, requires_grad=True, device=DEVICE)
    terms = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(residual_terms, dim=n, inputs=[x, y, w], outputs=[terms], device=DEVICE)
    objective = float(np.mean(terms.numpy()))
    terms.grad.fill_(1.0)  # expect: WT304
    tape.backward()

    d = w_np[0] * x_np + w_np[1] - y_np
    expected = np.array([np.mean(2.0 * d * x_np), np.mean(2.0 * d)])
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
