"""WT101: ``wp.copy(state.q, corrected)`` writes a projected result back into the state.

Position-based dynamics: predict from ``state.q``, project the prediction onto a soft
constraint, then copy the result back into ``state.q`` for the next step. The predict
launch of the same step read ``state.q``; its adjoint later sees the corrected values.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 4
STEPS = 3
DT = 0.3


@wp.kernel
def predict(q: wp.array(dtype=float), w: wp.array(dtype=float), q_pred: wp.array(dtype=float)):
    i = wp.tid()
    q_pred[i] = q[i] + DT * wp.sin(w[i] * q[i])


@wp.kernel
def project(q_pred: wp.array(dtype=float), corrected: wp.array(dtype=float)):
    i = wp.tid()
    x = q_pred[i]
    corrected[i] = x - 0.1 * x * x * x


@wp.kernel
def sum_squares(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i] * q[i])


class State:
    def __init__(self, q0):
        self.q = wp.array(q0, dtype=float, requires_grad=True, device=DEVICE)


def reference_loss(w, q0):
    q = q0.astype(np.float64)
    for _ in range(STEPS):
        x = q + DT * np.sin(w * q)
        q = x - 0.1 * x**3
    return np.sum(q * q)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    q0 = np.array([0.9, -1.2, 0.5, 1.6])
    w0 = np.array([1.5, 2.0, -1.0, 0.8])

    w = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
    state = State(q0)
    preds = [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(STEPS)]
    corrections = [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(STEPS)]
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        for t in range(STEPS):
            wp.launch(predict, dim=N, inputs=[state.q, w], outputs=[preds[t]], device=DEVICE)
            wp.launch(project, dim=N, inputs=[preds[t]], outputs=[corrections[t]], device=DEVICE)
            wp.copy(state.q, corrections[t])  # expect: WT101
        wp.launch(sum_squares, dim=N, inputs=[state.q], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = central_differences(lambda ww: reference_loss(ww, q0), w0)
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
