"""WT302 with the state carried by ``wp.copy`` and the gradient summed through ``wp.copy``.

The same state buffers serve every window: after a window's backward, ``wp.copy``
moves its final state into ``states[0]`` for the next window, and another ``wp.copy``
saves ``k.grad`` into a per-window buffer before ``tape.zero()``. After the last
window the saved gradients are added up for one parameter update. Each window's tape
sees its initial state as a constant, so the sum misses every path through the
carried state.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
N = 3
STEPS = 2
WINDOWS = 3
DT = 0.1
LR = 0.01


@wp.kernel
def spring_force(q: wp.array(dtype=float), k: wp.array(dtype=float), f: wp.array(dtype=float)):
    i = wp.tid()
    f[i] = -k[i] * q[i]


@wp.kernel
def integrate(q: wp.array(dtype=float), f: wp.array(dtype=float), q_out: wp.array(dtype=float)):
    i = wp.tid()
    q_out[i] = q[i] + DT * wp.tanh(f[i])


@wp.kernel
def sum_squares(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i] * q[i])


def objective_np(k, q):
    total = 0.0
    for _ in range(WINDOWS):
        for _ in range(STEPS):
            q = q + DT * np.tanh(-k * q)
        total += float(np.sum(q * q))
    return total


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
    window_grads = [wp.zeros(N, dtype=float, device=DEVICE) for _ in range(WINDOWS)]

    for w in range(WINDOWS):
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        tape = wp.Tape()
        with tape:
            for t in range(STEPS):
                wp.launch(spring_force, dim=N, inputs=[states[t], k], outputs=[forces[t]], device=DEVICE)
                wp.launch(
                    integrate, dim=N, inputs=[states[t], forces[t]], outputs=[states[t + 1]], device=DEVICE
                )
            wp.launch(sum_squares, dim=N, inputs=[states[-1]], outputs=[loss], device=DEVICE)
        tape.backward(loss)  # expect: WT302
        wp.copy(window_grads[w], k.grad)
        tape.zero()
        wp.copy(states[0], states[-1])

    total = sum(g.numpy().astype(np.float64) for g in window_grads)
    k.assign(k.numpy() - LR * total)
    expected = central_differences(lambda kk: objective_np(kk, q_start), k0)
    return {"grad": total, "expected": expected}


if __name__ == "__main__":
    run()
