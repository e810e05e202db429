"""WT103: a launch recorded on a second tape overwrites a scratch buffer the first tape read.

The task loss and a consistency regularizer are recorded on two tapes that share one
``features`` scratch buffer. The regularizer's feature launch (on ``reg_tape``)
overwrites ``features`` before ``task_tape.backward``, so the task adjoint reads the
features of the augmented input.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 4
REG_WEIGHT = 0.5


@wp.kernel
def featurize(x: wp.array(dtype=float), w: wp.array(dtype=float), features: wp.array(dtype=float)):
    i = wp.tid()
    features[i] = wp.tanh(w[i] * x[i])


@wp.kernel
def task_loss(features: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = features[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def smoothness_loss(features: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, REG_WEIGHT * features[i] * features[i])


def reference_loss(w, x, x_aug, target):
    task = np.sum((np.tanh(w * x) - target) ** 2)
    reg = REG_WEIGHT * np.sum(np.tanh(w * x_aug) ** 2)
    return task + reg


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    x0 = np.array([0.5, -1.0, 1.5, 0.2])
    x_aug0 = np.array([-0.8, 0.6, 0.3, 1.7])
    w0 = np.array([1.2, 0.7, -0.9, 2.0])
    target0 = np.array([0.3, -0.5, -0.7, 0.4])

    x = wp.array(x0, dtype=float, device=DEVICE)
    x_aug = wp.array(x_aug0, dtype=float, device=DEVICE)
    w = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
    target = wp.array(target0, dtype=float, device=DEVICE)
    features = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    loss_task = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    loss_reg = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    task_tape = wp.Tape()
    with task_tape:
        wp.launch(featurize, dim=N, inputs=[x, w], outputs=[features], device=DEVICE)
        wp.launch(task_loss, dim=N, inputs=[features, target], outputs=[loss_task], device=DEVICE)

    reg_tape = wp.Tape()
    with reg_tape:
        wp.launch(featurize, dim=N, inputs=[x_aug, w], outputs=[features], device=DEVICE)  # expect: WT103
        wp.launch(smoothness_loss, dim=N, inputs=[features], outputs=[loss_reg], device=DEVICE)

    reg_tape.backward(loss_reg)
    task_tape.backward(loss_task)

    expected = central_differences(lambda ww: reference_loss(ww, x0, x_aug0, target0), w0)
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
