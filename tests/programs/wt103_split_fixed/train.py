"""Fixed twin of wt103_split: telemetry writes the relative heights to its own buffer.

Entry point of the wt103_split_fixed program (telemetry in wt103_split_fixed_telemetry.py).
"""

import numpy as np
import warp as wp
import wt103_split_fixed_telemetry as telemetry

wp.config.quiet = True

DEVICE = "cpu"
N = 3
STEPS = 3
DT = 0.3
GROUND = -0.5


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
    q0 = np.array([0.4, 1.2, -0.6])
    w0 = np.array([1.5, -0.8, 1.1])

    log = telemetry.Telemetry(GROUND)
    w = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
    states = [wp.array(q0, dtype=float, requires_grad=True, device=DEVICE)]
    states += [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(STEPS)]
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        for t in range(STEPS):
            wp.launch(advance, dim=N, inputs=[states[t], w], outputs=[states[t + 1]], device=DEVICE)
        wp.launch(sum_squares, dim=N, inputs=[states[-1]], outputs=[loss], device=DEVICE)

    for t, state in enumerate(states):
        log.log(t, state)
    tape.backward(loss)

    expected = central_differences(lambda ww: reference_loss(ww, q0), w0)
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
