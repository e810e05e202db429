"""WT105: the end-of-episode reset is indented inside ``with tape:`` after the loss launch.

The reset does not feed the loss, yet it is recorded and it rewrites the initial state
the first step read, so the backward of that step runs against the next episode's
spawn positions. (Moving it out of the ``with`` block but before backward is
wt103_reset_outside, still wrong.)
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
    q_next[i] = q[i] + DT * wp.sin(w[i] * q[i])


@wp.kernel
def sum_squares(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i] * q[i])


@wp.kernel
def reset_state(spawn: wp.array(dtype=float), q: wp.array(dtype=float)):
    i = wp.tid()
    q[i] = spawn[i]


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
    q0 = np.array([0.7, -0.4, 1.1])
    w0 = np.array([1.4, 2.1, -0.9])
    next_spawn = np.array([-1.0, 0.9, 0.2])

    w = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
    spawn = wp.array(next_spawn, dtype=float, device=DEVICE)
    states = [wp.array(q0, dtype=float, requires_grad=True, device=DEVICE)]
    states += [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(STEPS)]
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        for t in range(STEPS):
            wp.launch(advance, dim=N, inputs=[states[t], w], outputs=[states[t + 1]], device=DEVICE)
        wp.launch(sum_squares, dim=N, inputs=[states[-1]], outputs=[loss], device=DEVICE)
        wp.launch(reset_state, dim=N, inputs=[spawn], outputs=[states[0]], device=DEVICE)  # expect: WT105
    tape.backward(loss)

    expected = central_differences(lambda ww: reference_loss(ww, q0), w0)
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
