"""Look-alike (fine): kernels that read an element and store an updated value into the same
element, using the old value only linearly.

``drift`` does ``q[i] = q[i] + DT * v[i]`` and ``damp`` does ``q[i] = DAMPING * q[i]``: the
adjoint of the store takes ``adj_q[i]`` (and zeroes it), the adjoint of the load adds the
propagated value back, and neither needs the old value of ``q[i]``. The gradient is exact
although the replay sees the updated ``q``.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 4
DT = 0.5
DAMPING = 0.9


@wp.kernel
def init(x: wp.array(dtype=float), q: wp.array(dtype=float)):
    i = wp.tid()
    q[i] = x[i] * x[i]


@wp.kernel
def drift(q: wp.array(dtype=float), v: wp.array(dtype=float)):
    i = wp.tid()
    q[i] = q[i] + DT * v[i]


@wp.kernel
def damp(q: wp.array(dtype=float)):
    i = wp.tid()
    q[i] = DAMPING * q[i] - 0.1


@wp.kernel
def energy(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i] * q[i])


def run() -> dict:
    x0 = np.array([0.3, -0.7, 1.1, 0.5])
    v0 = np.array([1.0, 2.0, -1.0, 0.5])
    x = wp.array(x0, dtype=float, requires_grad=True, device=DEVICE)
    v = wp.array(v0, dtype=float, requires_grad=True, device=DEVICE)
    q = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(init, dim=N, inputs=[x], outputs=[q], device=DEVICE)
        wp.launch(drift, dim=N, inputs=[q, v], device=DEVICE)
        wp.launch(damp, dim=N, inputs=[q], device=DEVICE)
        wp.launch(energy, dim=N, inputs=[q], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    q_final = DAMPING * (x0 * x0 + DT * v0) - 0.1
    grad_x = 2.0 * q_final * DAMPING * 2.0 * x0
    grad_v = 2.0 * q_final * DAMPING * DT
    grad = np.concatenate([x.grad.numpy(), v.grad.numpy()])
    return {"grad": grad, "expected": np.concatenate([grad_x, grad_v])}


if __name__ == "__main__":
    run()
