"""WT102 across modules: an activation applied in place by a helper of another module.

``wt102_split_layers.activate`` launches a kernel that reads ``h[i]`` and stores
``softsign(h[i])`` into the same element; the adjoint evaluates the softsign derivative
at the activated value. Entry point of the wt102_split program.
"""

import numpy as np
import warp as wp
import wt102_split_layers as layers

wp.config.quiet = True

DEVICE = "cpu"
N_IN = 3
N_OUT = 2


@wp.kernel
def mse(h: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = h[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


def reference_loss(w_flat, x, b, target):
    h = w_flat.reshape(N_OUT, N_IN) @ x + b
    h = h / (1.0 + np.abs(h))
    return np.sum((h - target) ** 2)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    x0 = np.array([1.0, -2.0, 0.5])
    w0 = np.array([[0.8, -0.5, 1.2], [-1.0, 0.3, 0.7]])
    b0 = np.array([0.1, -0.2])
    target0 = np.array([0.2, -0.6])

    x = wp.array(x0, dtype=float, device=DEVICE)
    weights = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
    bias = wp.array(b0, dtype=float, requires_grad=True, device=DEVICE)
    target = wp.array(target0, dtype=float, device=DEVICE)
    h = wp.zeros(N_OUT, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(layers.dense, dim=N_OUT, inputs=[x, weights, bias], outputs=[h], device=DEVICE)
        y = layers.activate(h)
        wp.launch(mse, dim=N_OUT, inputs=[y, target], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = central_differences(lambda w: reference_loss(w, x0, b0, target0), w0.ravel()).reshape(
        N_OUT, N_IN
    )
    return {"grad": weights.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
