"""Look-alike (fine): the optimizer updates the parameters in place after ``tape.backward``.

``sgd_step`` reads the gradient and overwrites ``w``, which the recorded forward read,
but only after that tape's backward; the next iteration records a new tape.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 3
ITERS = 3
LR = 0.5


@wp.kernel
def predict(x: wp.array(dtype=float), w: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.tanh(w[i] * x[i])


@wp.kernel
def mse(y: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd_step(grad: wp.array(dtype=float), lr: float, params: wp.array(dtype=float)):
    i = wp.tid()
    params[i] -= lr * grad[i]


def analytic_grad(w, x, target):
    h = np.tanh(w * x)
    return 2.0 * (h - target) * (1.0 - h * h) * x


def run() -> dict:
    x0 = np.array([0.5, -1.0, 1.5])
    target0 = np.array([0.4, 0.3, -0.6])

    x = wp.array(x0, dtype=float, device=DEVICE)
    w = wp.array([0.2, 0.5, 0.1], dtype=float, requires_grad=True, device=DEVICE)
    target = wp.array(target0, dtype=float, device=DEVICE)
    y = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    grads, expected = [], []
    for _ in range(ITERS):
        loss.zero_()
        tape = wp.Tape()
        with tape:
            wp.launch(predict, dim=N, inputs=[x, w], outputs=[y], device=DEVICE)
            wp.launch(mse, dim=N, inputs=[y, target], outputs=[loss], device=DEVICE)
        tape.backward(loss)

        grads.append(w.grad.numpy().copy())
        expected.append(analytic_grad(w.numpy().astype(np.float64), x0, target0))
        wp.launch(sgd_step, dim=N, inputs=[w.grad, LR], outputs=[w], device=DEVICE)
        tape.zero()

    return {"grad": np.concatenate(grads), "expected": np.concatenate(expected)}


if __name__ == "__main__":
    run()
