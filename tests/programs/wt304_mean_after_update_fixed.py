"""Fixed twin of wt304_mean_after_update: the seed carries the mean's 1/N.

``terms.grad.fill_(1.0 / N)`` backpropagates the mean the program reports after each update
(the ``mean_loss`` kernel's ``terms[i] / float(N)``): the seed matches the objective.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
N = 8
LR = 0.05


@wp.kernel
def residual_terms(
    x: wp.array(dtype=float), y: wp.array(dtype=float), w: wp.array(dtype=float), terms: wp.array(dtype=float)
):
    i = wp.tid()
    d = w[0] * x[i] + w[1] - y[i]
    terms[i] = d * d


@wp.kernel
def mean_loss(terms: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, terms[i] / float(N))


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
    loss = wp.zeros(1, dtype=float, device=DEVICE)
    history = []
    for _ in range(3):
        w_now = w.numpy().astype(np.float64).copy()
        tape = wp.Tape()
        with tape:
            wp.launch(residual_terms, dim=N, inputs=[x, y, w], outputs=[terms], device=DEVICE)
        terms.grad.fill_(1.0 / N)
        tape.backward()
        grad = w.grad.numpy().astype(np.float64).copy()
        wp.launch(sgd, dim=2, inputs=[w, w.grad, LR], device=DEVICE)
        tape.zero()
        # the loss reported for the updated parameters
        wp.launch(residual_terms, dim=N, inputs=[x, y, w], outputs=[terms], device=DEVICE)
        loss.zero_()
        wp.launch(mean_loss, dim=N, inputs=[terms], outputs=[loss], device=DEVICE)
        history.append(float(loss.numpy()[0]))
    d = w_now[0] * x_np + w_now[1] - y_np
    expected = np.array([np.mean(2.0 * d * x_np), np.mean(2.0 * d)])
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
