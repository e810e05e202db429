"""Look-alike (fine): reads and writes go to disjoint views of one allocation.

One buffer holds ``[observations | predictions | log]``. The recorded forward reads the
observation view and writes the prediction view; after recording, an untaped launch
writes the log view before backward. No write touches memory a recorded launch read.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 3


@wp.kernel
def predict(obs: wp.array(dtype=float), w: wp.array(dtype=float), pred: wp.array(dtype=float)):
    i = wp.tid()
    pred[i] = wp.tanh(w[i] * obs[i])


@wp.kernel
def mse(pred: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = pred[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def log_magnitude(pred: wp.array(dtype=float), log: wp.array(dtype=float)):
    i = wp.tid()
    log[i] = wp.abs(pred[i])


def analytic_grad(w, x, target):
    h = np.tanh(w * x)
    return 2.0 * (h - target) * (1.0 - h * h) * x


def run() -> dict:
    obs0 = np.array([0.5, -1.0, 1.5])
    w0 = np.array([0.8, -0.5, 0.3])
    target0 = np.array([0.1, 0.6, -0.2])

    storage = np.zeros(3 * N)
    storage[:N] = obs0
    buffer = wp.array(storage, dtype=float, requires_grad=True, device=DEVICE)
    obs, pred, log = buffer[0:N], buffer[N : 2 * N], buffer[2 * N : 3 * N]
    w = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
    target = wp.array(target0, dtype=float, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(predict, dim=N, inputs=[obs, w], outputs=[pred], device=DEVICE)
        wp.launch(mse, dim=N, inputs=[pred, target], outputs=[loss], device=DEVICE)
    wp.launch(log_magnitude, dim=N, inputs=[pred], outputs=[log], device=DEVICE)
    tape.backward(loss)

    return {"grad": w.grad.numpy().copy(), "expected": analytic_grad(w0, obs0, target0)}


if __name__ == "__main__":
    run()
