"""Look-alike (fine): several force kernels accumulate into one buffer with ``f[i] += ...``.

Gravity, springs and drag each add their contribution to the step's force buffer
before anything reads it; ``+=`` on an array element is an atomic accumulation and its
adjoint is exact. Each step has its own force buffer.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 3
STEPS = 2
DT = 0.3
GRAVITY = -1.0


@wp.kernel
def add_gravity(force: wp.array(dtype=float)):
    i = wp.tid()
    force[i] += GRAVITY


@wp.kernel
def add_springs(q: wp.array(dtype=float), k: wp.array(dtype=float), force: wp.array(dtype=float)):
    i = wp.tid()
    force[i] += -k[i] * q[i]


@wp.kernel
def add_drag(q: wp.array(dtype=float), c: wp.array(dtype=float), force: wp.array(dtype=float)):
    i = wp.tid()
    force[i] += -c[0] * q[i] * wp.abs(q[i])


@wp.kernel
def integrate(q: wp.array(dtype=float), force: wp.array(dtype=float), q_next: wp.array(dtype=float)):
    i = wp.tid()
    q_next[i] = q[i] + DT * wp.tanh(force[i])


@wp.kernel
def sum_squares(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i] * q[i])


def reference_loss(k, c, q0):
    q = q0.astype(np.float64)
    for _ in range(STEPS):
        f = GRAVITY - k * q - c * q * np.abs(q)
        q = q + DT * np.tanh(f)
    return np.sum(q * q)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    q0 = np.array([1.0, -0.5, 0.3])
    k0 = np.array([1.5, 0.8, 2.0])
    c0 = 0.4

    k = wp.array(k0, dtype=float, requires_grad=True, device=DEVICE)
    c = wp.array([c0], dtype=float, requires_grad=True, device=DEVICE)
    states = [wp.array(q0, dtype=float, requires_grad=True, device=DEVICE)]
    states += [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(STEPS)]
    forces = [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(STEPS)]
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        for t in range(STEPS):
            wp.launch(add_gravity, dim=N, inputs=[], outputs=[forces[t]], device=DEVICE)
            wp.launch(add_springs, dim=N, inputs=[states[t], k], outputs=[forces[t]], device=DEVICE)
            wp.launch(add_drag, dim=N, inputs=[states[t], c], outputs=[forces[t]], device=DEVICE)
            wp.launch(integrate, dim=N, inputs=[states[t], forces[t]], outputs=[states[t + 1]], device=DEVICE)
        wp.launch(sum_squares, dim=N, inputs=[states[-1]], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected_k = central_differences(lambda kk: reference_loss(kk, c0, q0), k0)
    expected_c = central_differences(lambda cc: reference_loss(k0, cc[0], q0), np.array([c0]))
    grad = np.concatenate([k.grad.numpy(), c.grad.numpy()])
    return {"grad": grad, "expected": np.concatenate([expected_k, expected_c])}


if __name__ == "__main__":
    run()
