"""WT103: ``wp.copy`` carries the final state into the initial one before backward.

To continue the next rollout where this one ended, the final state is copied into
``states[0]`` right after the ``with tape:`` block. The copy is not recorded (no tape
is active), but it changes the memory the first step read before ``tape.backward``.
"""

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
    q_next[i] = q[i] + DT * wp.sin(w[i] * q[i] * q[i])


@wp.kernel
def sum_squares(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i] * q[i])


def reference_loss(w, q0):
    q = q0.astype(np.float64)
    for _ in range(STEPS):
        q = q + DT * np.sin(w * q * q)
    return np.sum(q * q)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    q0 = np.array([0.8, -1.1, 0.4])
    w0 = np.array([1.3, 0.6, 2.4])

    w = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
    states = [wp.array(q0, dtype=float, requires_grad=True, device=DEVICE)]
    states += [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(STEPS)]
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        for t in range(STEPS):
            wp.launch(advance, dim=N, inputs=[states[t], w], outputs=[states[t + 1]], device=DEVICE)
        wp.launch(sum_squares, dim=N, inputs=[states[-1]], outputs=[loss], device=DEVICE)
    wp.copy(states[0], states[-1])  # expect: WT103
    tape.backward(loss)

    expected = central_differences(lambda ww: reference_loss(ww, q0), w0)
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
