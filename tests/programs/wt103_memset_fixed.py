"""Fixed twin of wt103_memset: the history is cleared after ``tape.backward``."""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 3
STEPS = 3
DT = 0.3


@wp.kernel
def advance(q: wp.array(dtype=float), w: wp.array(dtype=float), q_next: wp.array(dtype=float)):
    i = wp.tid()
    q_next[i] = q[i] + DT * wp.sin(w[i] * q[i])


@wp.kernel
def sum_squares(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i] * q[i])


def reference_loss(w, q0):
    q = q0.astype(np.float64)
    for _ in range(STEPS):
        q = q + DT * np.sin(w * q)
    return np.sum(q * q)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    q0 = np.array([0.9, -0.5, 1.2])
    w0 = np.array([1.1, 1.8, -0.7])

    w = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
    initial = np.zeros((STEPS + 1, N))
    initial[0] = q0
    history = wp.array(initial, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        for t in range(STEPS):
            wp.launch(advance, dim=N, inputs=[history[t], w], outputs=[history[t + 1]], device=DEVICE)
        wp.launch(sum_squares, dim=N, inputs=[history[STEPS]], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    history.zero_()

    expected = central_differences(lambda ww: reference_loss(ww, q0), w0)
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
