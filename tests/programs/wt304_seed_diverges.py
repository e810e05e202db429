"""WT304 behind a divergence: a hand seed 16x too large makes a stable step size diverge.

A line is fitted to 16 samples. The objective the program reports (and prints) is the mean
squared error, computed by an untaped kernel after each update; the backward is seeded by
filling the gradient of the 16 per-sample terms with ones, which backpropagates their *sum*:
every gradient is 16 times the gradient of the reported objective. The step size 0.15 is
stable for the mean (0.15 L = 0.4) but not for the sum (16x that): the fit diverges and the
squared errors overflow float32 after a few dozen steps. The cause is the seed, not the
kernel that overflows (no WT501). WT304 names the seed: the program reduces the same terms
by a mean (off the tape, after the update), which the sum the seed backpropagates is not.
"""
# check-numerics

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
N = 16
STEPS = 40
LR = 0.15


@wp.kernel
def residual_terms(
    x: wp.array(dtype=float), y: wp.array(dtype=float), w: wp.array(dtype=float), terms: wp.array(dtype=float)
):
    i = wp.tid()
    d = w[0] * x[i] + w[1] - y[i]
    terms[i] = d * d


@wp.kernel
def mean(terms: wp.array(dtype=float), objective: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(objective, 0, terms[i] / float(terms.shape[0]))


@wp.kernel
def sgd(w: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    w[i] = w[i] - lr * grad[i]


def run() -> dict:
    x_np = np.linspace(0.0, 1.0, N)
    y_np = 2.0 * x_np - 1.0 + 0.1 * np.cos(7.0 * x_np)
    x = wp.array(x_np, dtype=float, device=DEVICE)
    y = wp.array(y_np, dtype=float, device=DEVICE)
    w = wp.array([0.5, 0.3], dtype=float, requires_grad=True, device=DEVICE)
    terms = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    objective = wp.zeros(1, dtype=float, device=DEVICE)
    first = None
    for _ in range(STEPS):
        tape = wp.Tape()
        with tape:
            wp.launch(residual_terms, dim=N, inputs=[x, y, w], outputs=[terms], device=DEVICE)
        terms.grad.fill_(1.0)  # expect: WT304
        tape.backward()
        if first is None:
            w_np = w.numpy().astype(np.float64)
            d = w_np[0] * x_np + w_np[1] - y_np
            first = (w.grad.numpy().copy(), np.array([np.mean(2.0 * d * x_np), np.mean(2.0 * d)]))
        wp.launch(sgd, dim=2, inputs=[w, w.grad, LR], device=DEVICE)  # expect: WT505
        tape.zero()
        objective.zero_()
        wp.launch(mean, dim=N, inputs=[terms], outputs=[objective], device=DEVICE)
        print(f"mse {objective.numpy()[0]:.4g}")
    return {"grad": first[0], "expected": first[1]}


if __name__ == "__main__":
    run()
