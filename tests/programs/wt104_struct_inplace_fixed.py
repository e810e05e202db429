"""Fixed twin of wt104_struct_inplace: one State struct per step, step reads one and writes the next."""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 3
STEPS = 4
DT = 0.2


@wp.struct
class State:
    q: wp.array(dtype=float)
    v: wp.array(dtype=float)


@wp.kernel
def step(state: State, stiffness: wp.array(dtype=float), next_state: State):
    i = wp.tid()
    v = state.v[i] - DT * stiffness[i] * wp.sin(state.q[i])
    next_state.v[i] = v
    next_state.q[i] = state.q[i] + DT * v


@wp.kernel
def sum_squares(state: State, loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, state.q[i] * state.q[i])


def reference_loss(stiffness, q0, v0):
    q = q0.astype(np.float64)
    v = v0.astype(np.float64)
    for _ in range(STEPS):
        v = v - DT * stiffness * np.sin(q)
        q = q + DT * v
    return np.sum(q * q)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def make_state(q, v):
    state = State()
    state.q = wp.array(q, dtype=float, requires_grad=True, device=DEVICE)
    state.v = wp.array(v, dtype=float, requires_grad=True, device=DEVICE)
    return state


def run() -> dict:
    q0 = np.array([0.8, -1.2, 2.0])
    v0 = np.array([0.0, 0.5, -0.3])
    k0 = np.array([3.0, 2.0, 4.0])

    stiffness = wp.array(k0, dtype=float, requires_grad=True, device=DEVICE)
    states = [make_state(q0, v0)] + [make_state(np.zeros(N), np.zeros(N)) for _ in range(STEPS)]
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        for t in range(STEPS):
            wp.launch(step, dim=N, inputs=[states[t], stiffness], outputs=[states[t + 1]], device=DEVICE)
        wp.launch(sum_squares, dim=N, inputs=[states[-1]], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = central_differences(lambda kk: reference_loss(kk, q0, v0), k0)
    return {"grad": stiffness.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
