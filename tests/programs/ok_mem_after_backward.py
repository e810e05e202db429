"""Look-alike (fine): state carried over and scratch cleared only after ``tape.backward``.

Two episodes reuse the same state buffers. Between them, ``wp.copy`` carries the final
state into the initial one and ``force.zero_()`` clears the scratch, both after the
first tape's backward, before the second tape records.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 3
STEPS = 2
EPISODES = 2
DT = 0.3


@wp.kernel
def spring_force(q: wp.array(dtype=float), k: wp.array(dtype=float), force: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(force, i, -k[i] * q[i])


@wp.kernel
def integrate(q: wp.array(dtype=float), force: wp.array(dtype=float), q_next: wp.array(dtype=float)):
    i = wp.tid()
    q_next[i] = q[i] + DT * wp.tanh(force[i])


@wp.kernel
def sum_squares(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i] * q[i])


def reference_rollout(k, q0):
    q = q0.astype(np.float64)
    for _ in range(STEPS):
        q = q + DT * np.tanh(-k * q)
    return q


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    q_start = np.array([1.0, -0.7, 0.4])
    k0 = np.array([1.5, 2.0, 0.8])

    k = wp.array(k0, dtype=float, requires_grad=True, device=DEVICE)
    states = [wp.array(q_start, dtype=float, requires_grad=True, device=DEVICE)]
    states += [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(STEPS)]
    forces = [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(STEPS)]
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    grads, expected = [], []
    q_episode = q_start
    for _ in range(EPISODES):
        tape = wp.Tape()
        with tape:
            for t in range(STEPS):
                wp.launch(spring_force, dim=N, inputs=[states[t], k], outputs=[forces[t]], device=DEVICE)
                wp.launch(
                    integrate, dim=N, inputs=[states[t], forces[t]], outputs=[states[t + 1]], device=DEVICE
                )
            wp.launch(sum_squares, dim=N, inputs=[states[-1]], outputs=[loss], device=DEVICE)
        tape.backward(loss)
        grads.append(k.grad.numpy().copy())
        q_fixed = q_episode
        expected.append(central_differences(lambda kk, q=q_fixed: np.sum(reference_rollout(kk, q) ** 2), k0))

        # next episode starts where this one ended; all of it after the backward
        tape.zero()
        wp.copy(states[0], states[-1])
        for force in forces:
            force.zero_()
        loss.zero_()
        q_episode = reference_rollout(k0, q_episode)

    return {"grad": np.concatenate(grads), "expected": np.concatenate(expected)}


if __name__ == "__main__":
    run()
