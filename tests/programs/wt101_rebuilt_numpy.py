"""WT101 in a training loop that rebuilds its parameter from ``numpy()`` every iteration.

Each iteration records a fresh tape over a short rollout, backpropagates the loss, reads
``k.grad.numpy()`` and rebuilds the parameter as a new array,
``k = wp.array(k.numpy() - LR * g, requires_grad=True)``: every iteration's ``k`` is a
new allocation whose gradient starts at zero. The bug is inside the rollout: one force
buffer serves every step, so each integrate adjoint sees the last step's force.
The fixed twin gives each step its own force buffer.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 4
STEPS = 4
ITERS = 3
DT = 0.2
FMAX = 1.5
LR = 0.05


@wp.kernel
def spring_force(q: wp.array(dtype=float), k: wp.array(dtype=float), force: wp.array(dtype=float)):
    i = wp.tid()
    force[i] = -k[i] * q[i]


@wp.kernel
def integrate(q: wp.array(dtype=float), force: wp.array(dtype=float), q_next: wp.array(dtype=float)):
    i = wp.tid()
    q_next[i] = q[i] + DT * FMAX * wp.tanh(force[i] / FMAX)


@wp.kernel
def sum_squares(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i] * q[i])


def reference_loss(k, q0):
    q = q0.astype(np.float64)
    for _ in range(STEPS):
        q = q + DT * FMAX * np.tanh(-k * q / FMAX)
    return np.sum(q * q)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    q0 = np.array([1.0, -0.8, 0.6, 1.4])
    k = wp.array(np.array([2.0, 3.0, 1.5, 2.5]), dtype=float, requires_grad=True, device=DEVICE)
    grads, expected = [], []
    for _ in range(ITERS):
        states = [wp.array(q0, dtype=float, requires_grad=True, device=DEVICE)]
        states += [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(STEPS)]
        force = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        tape = wp.Tape()
        with tape:
            for t in range(STEPS):
                wp.launch(spring_force, dim=N, inputs=[states[t], k], outputs=[force])  # expect: WT101
                wp.launch(integrate, dim=N, inputs=[states[t], force], outputs=[states[t + 1]], device=DEVICE)
            wp.launch(sum_squares, dim=N, inputs=[states[-1]], outputs=[loss], device=DEVICE)
        tape.backward(loss)
        g = k.grad.numpy()
        k_now = k.numpy().astype(np.float64)
        grads.append(g.copy())
        expected.append(central_differences(lambda kk: reference_loss(kk, q0), k_now))
        k = wp.array(k.numpy() - LR * g, dtype=float, requires_grad=True, device=DEVICE)
    return {"grad": np.concatenate(grads), "expected": np.concatenate(expected)}


if __name__ == "__main__":
    run()
