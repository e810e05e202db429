"""Look-alike (fine): inputs and targets of each batch are written before recording.

``x.assign(...)`` and ``target.fill_(...)`` overwrite arrays the previous batch's tape
read, but only after that tape's backward and before the new tape starts.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 3
BATCHES = (
    (np.array([0.5, -1.0, 1.5]), 0.3),
    (np.array([1.2, 0.4, -0.8]), -0.2),
    (np.array([-0.3, 2.0, 0.7]), 0.6),
)


@wp.kernel
def predict(x: wp.array(dtype=float), w: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.tanh(w[i] * x[i])


@wp.kernel
def mse(y: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


def analytic_grad(w, x, target):
    h = np.tanh(w * x)
    return 2.0 * (h - target) * (1.0 - h * h) * x


def run() -> dict:
    w0 = np.array([0.8, -0.5, 0.3])

    w = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
    x = wp.zeros(N, dtype=float, device=DEVICE)
    target = wp.zeros(N, dtype=float, device=DEVICE)
    y = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    grads, expected = [], []
    for inputs, goal in BATCHES:
        x.assign(inputs)
        target.fill_(goal)
        loss.zero_()
        tape = wp.Tape()
        with tape:
            wp.launch(predict, dim=N, inputs=[x, w], outputs=[y], device=DEVICE)
            wp.launch(mse, dim=N, inputs=[y, target], outputs=[loss], device=DEVICE)
        tape.backward(loss)
        grads.append(w.grad.numpy().copy())
        expected.append(analytic_grad(w0, inputs, goal))
        tape.zero()

    return {"grad": np.concatenate(grads), "expected": np.concatenate(expected)}


if __name__ == "__main__":
    run()
