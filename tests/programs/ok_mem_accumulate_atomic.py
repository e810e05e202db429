"""Look-alike (fine): springs scatter forces into shared node buffers with ``wp.atomic_add``.

Every spring adds into the force of both its nodes; the buffer is only read after all
contributions are in. Accumulation is exact in backward.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 4
DT = 0.5
SPRINGS = np.array([[0, 1], [1, 2], [2, 3], [0, 2]], dtype=np.int32)


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
    d = q[b] - q[a]
    f = k[s] * d * wp.abs(d)
    wp.atomic_add(force, a, f)
    wp.atomic_add(force, b, -f)


@wp.kernel
def integrate(q: wp.array(dtype=float), force: wp.array(dtype=float), q_next: wp.array(dtype=float)):
    i = wp.tid()
    q_next[i] = q[i] + DT * wp.tanh(force[i])


@wp.kernel
def sum_squares(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i] * q[i])


def reference_loss(k, q0):
    q = q0.astype(np.float64)
    f = np.zeros(N)
    for s, (a, b) in enumerate(SPRINGS):
        d = q[b] - q[a]
        fs = k[s] * d * np.abs(d)
        f[a] += fs
        f[b] -= fs
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
    q0 = np.array([0.0, 0.6, -0.3, 0.8])
    k0 = np.array([1.0, 0.6, 1.4, 0.9])

    springs = wp.array(SPRINGS, dtype=wp.int32, device=DEVICE)
    k = wp.array(k0, dtype=float, requires_grad=True, device=DEVICE)
    q = wp.array(q0, dtype=float, requires_grad=True, device=DEVICE)
    force = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    q_next = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(spring_forces, dim=len(SPRINGS), inputs=[q, springs, k], outputs=[force], device=DEVICE)
        wp.launch(integrate, dim=N, inputs=[q, force], outputs=[q_next], device=DEVICE)
        wp.launch(sum_squares, dim=N, inputs=[q_next], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = central_differences(lambda kk: reference_loss(kk, q0), k0)
    return {"grad": k.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
