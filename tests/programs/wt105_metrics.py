"""WT105: a metrics kernel inside ``with tape:`` reuses the forward's scratch buffer.

After the loss launch, the mean absolute error is computed for logging, and the
per-element errors are written into ``scratch``, the buffer that held the hidden
activations the loss was computed from. The metrics launch is recorded, does not feed
the loss, and the loss adjoint reads error values instead of activations.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 4


@wp.kernel
def hidden_layer(x: wp.array(dtype=float), w: wp.array(dtype=float), scratch: wp.array(dtype=float)):
    i = wp.tid()
    scratch[i] = wp.tanh(w[i] * x[i])


@wp.kernel
def readout(
    scratch: wp.array(dtype=float),
    target: wp.array(dtype=float),
    pred: wp.array(dtype=float),
    loss: wp.array(dtype=float),
):
    i = wp.tid()
    h = scratch[i]
    p = h * h
    pred[i] = p
    d = p - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def error_metrics(
    pred: wp.array(dtype=float),
    target: wp.array(dtype=float),
    scratch: wp.array(dtype=float),
    mae: wp.array(dtype=float),
):
    i = wp.tid()
    e = wp.abs(pred[i] - target[i])
    scratch[i] = e
    wp.atomic_add(mae, 0, e / float(N))


def reference_loss(w, x, target):
    p = np.tanh(w * x) ** 2
    return np.sum((p - target) ** 2)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    x0 = np.array([0.5, -1.2, 0.9, 2.0])
    w0 = np.array([1.1, 0.7, -1.4, 0.3])
    target0 = np.array([0.5, 0.2, 0.9, 0.1])

    x = wp.array(x0, dtype=float, device=DEVICE)
    w = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
    target = wp.array(target0, dtype=float, device=DEVICE)
    scratch = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    pred = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    mae = wp.zeros(1, dtype=float, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(hidden_layer, dim=N, inputs=[x, w], outputs=[scratch], device=DEVICE)
        wp.launch(readout, dim=N, inputs=[scratch, target], outputs=[pred, loss], device=DEVICE)
        logged = [scratch, mae]
        wp.launch(error_metrics, dim=N, inputs=[pred, target], outputs=logged, device=DEVICE)  # expect: WT105
    tape.backward(loss)

    expected = central_differences(lambda ww: reference_loss(ww, x0, target0), w0)
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
