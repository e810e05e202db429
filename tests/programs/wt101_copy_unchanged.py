"""WT101 (warning): a write-back whose values happen to be unchanged.

A floor constraint is enforced on the state and the result copied back into ``q``
with ``wp.copy``. No particle is below the floor in this run, so the copy writes the
values ``q`` already held and, on Warp >= 1.17, the gradient comes out right. The
overwrite of an array the tape read is still there (the first particle that touches
the floor makes the gradient wrong); the fix is the same as for a real write-back.
"""

# grad: right
# grad-wrong-before: 1.17  (the copy adjoint overwrote the source gradient until then)

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 4
DT = 0.3
FLOOR = -5.0


@wp.kernel
def spring_energy(q: wp.array(dtype=float), k: wp.array(dtype=float), energy: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(energy, 0, 0.5 * k[i] * q[i] * q[i])


@wp.kernel
def enforce_floor(q: wp.array(dtype=float), corrected: wp.array(dtype=float)):
    i = wp.tid()
    corrected[i] = wp.max(q[i], FLOOR)


@wp.kernel
def advance(q: wp.array(dtype=float), k: wp.array(dtype=float), q_next: wp.array(dtype=float)):
    i = wp.tid()
    q_next[i] = q[i] + DT * wp.sin(k[i] * q[i])


@wp.kernel
def objective(q: wp.array(dtype=float), energy: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    if i == 0:
        wp.atomic_add(loss, 0, energy[0])
    wp.atomic_add(loss, 0, q[i] * q[i])


def reference_loss(q0, k):
    energy = np.sum(0.5 * k * q0 * q0)
    q = np.maximum(q0, FLOOR)
    q1 = q + DT * np.sin(k * q)
    return energy + np.sum(q1 * q1)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    q_init = np.array([0.7, -1.1, 0.3, 1.4])
    k0 = np.array([1.2, 2.0, 0.5, 1.7])

    q = wp.array(q_init, dtype=float, requires_grad=True, device=DEVICE)
    k = wp.array(k0, dtype=float, requires_grad=True, device=DEVICE)
    corrected = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    q_next = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    energy = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(spring_energy, dim=N, inputs=[q, k], outputs=[energy], device=DEVICE)
        wp.launch(enforce_floor, dim=N, inputs=[q], outputs=[corrected], device=DEVICE)
        wp.copy(q, corrected)  # expect: WT101
        wp.launch(advance, dim=N, inputs=[q, k], outputs=[q_next], device=DEVICE)
        wp.launch(objective, dim=N, inputs=[q_next, energy], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = central_differences(lambda qq: reference_loss(qq, k0), q_init)
    return {"grad": q.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
