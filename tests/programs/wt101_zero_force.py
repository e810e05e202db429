"""WT101: ``force.zero_()`` at the start of every step clears a buffer the previous step read.

Spring forces are scattered into a per-node ``force`` buffer with atomics, so the
buffer is cleared with a memset before each step. The integrate launch of the previous
step read ``force`` (through a saturating actuator), and its adjoint runs against the
last step's forces.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 4
STEPS = 3
DT = 0.25
FMAX = 1.0
SPRINGS = np.array([[0, 1], [1, 2], [2, 3], [3, 0]], dtype=np.int32)


@wp.kernel
def spring_forces(
    q: wp.array(dtype=float),
    springs: wp.array2d(dtype=wp.int32),
    k: wp.array(dtype=float),
    force: wp.array(dtype=float),
):
    s = wp.tid()
    a = springs[s, 0]
    b = springs[s, 1]
    f = k[s] * (q[b] - q[a])
    wp.atomic_add(force, a, f)
    wp.atomic_sub(force, b, f)


@wp.kernel
def integrate(q: wp.array(dtype=float), force: wp.array(dtype=float), q_next: wp.array(dtype=float)):
    i = wp.tid()
    q_next[i] = q[i] + DT * FMAX * wp.tanh(force[i] / FMAX)


@wp.kernel
def sum_squares(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


def reference_loss(k, q0):
    q = q0.astype(np.float64)
    for _ in range(STEPS):
        f = np.zeros(N)
        for s, (a, b) in enumerate(SPRINGS):
            fs = k[s] * (q[b] - q[a])
            f[a] += fs
            f[b] -= fs
        q = q + DT * FMAX * np.tanh(f / FMAX)
    return np.sum(q * q)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    q0 = np.array([0.0, 1.0, -0.5, 0.8])
    k0 = np.array([1.5, 0.8, 2.0, 1.2])

    springs = wp.array(SPRINGS, dtype=wp.int32, device=DEVICE)
    k = wp.array(k0, dtype=float, requires_grad=True, device=DEVICE)
    states = [wp.array(q0, dtype=float, requires_grad=True, device=DEVICE)]
    states += [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(STEPS)]
    force = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        for t in range(STEPS):
            force.zero_()  # expect: WT101
            wp.launch(
                spring_forces,
                dim=len(SPRINGS),
                inputs=[states[t], springs, k],
                outputs=[force],
                device=DEVICE,
            )
            wp.launch(integrate, dim=N, inputs=[states[t], force], outputs=[states[t + 1]], device=DEVICE)
        wp.launch(sum_squares, dim=N, inputs=[states[-1]], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = central_differences(lambda kk: reference_loss(kk, q0), k0)
    return {"grad": k.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
