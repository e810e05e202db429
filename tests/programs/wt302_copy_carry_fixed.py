"""Fixed twin of wt302_copy_carry: per-window buffers on one tape, one backward.

Every window gets its own state and force buffers, all windows are recorded on one
tape with one summed loss, and ``wp.copy`` saves ``k.grad`` once, after the single
backward, for the host-side update.
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
    total_steps = STEPS * WINDOWS
    states = [wp.array(q_start, dtype=float, requires_grad=True, device=DEVICE)]
    states += [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(total_steps)]
    forces = [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(total_steps)]
    window_grads = [wp.zeros(N, dtype=float, device=DEVICE)]

    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        for w in range(WINDOWS):
            for t in range(w * STEPS, (w + 1) * STEPS):
                wp.launch(spring_force, dim=N, inputs=[states[t], k], outputs=[forces[t]], device=DEVICE)
                wp.launch(
                    integrate, dim=N, inputs=[states[t], forces[t]], outputs=[states[t + 1]], device=DEVICE
                )
            wp.launch(sum_squares, dim=N, inputs=[states[(w + 1) * STEPS]], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    wp.copy(window_grads[0], k.grad)
    tape.zero()

    total = sum(g.numpy().astype(np.float64) for g in window_grads)
    k.assign(k.numpy() - LR * total)
    expected = central_differences(lambda kk: objective_np(kk, q_start), k0)
    return {"grad": total, "expected": expected}


if __name__ == "__main__":
    run()
