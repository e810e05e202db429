"""Dynamics and host helpers of the wt302_host_window program."""

import numpy as np
import warp as wp

DEVICE = "cpu"
DT = 0.1
STEPS = 2


@wp.kernel
def step(
    q: wp.array(dtype=float),
    qd: wp.array(dtype=float),
    gain: wp.array(dtype=float),
    q_out: wp.array(dtype=float),
    qd_out: wp.array(dtype=float),
):
    i = wp.tid()
    v = qd[i] + DT * (1.0 - gain[i] * q[i] - wp.sin(q[i]))
    qd_out[i] = v
    q_out[i] = q[i] + DT * v


@wp.kernel
def track(q: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = q[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


def to_device(state: dict) -> dict:
    """A window's initial state, made from host arrays."""
    return {
        name: wp.array(values, dtype=float, requires_grad=True, device=DEVICE)
        for name, values in state.items()
    }


def to_host(state: dict) -> dict:
    return {name: array.numpy().copy() for name, array in state.items()}


def simulate(state: dict, gain, steps: int = STEPS) -> dict:
    n = state["q"].shape[0]
    for _ in range(steps):
        nxt = {name: wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE) for name in state}
        wp.launch(
            step, dim=n, inputs=[state["q"], state["qd"], gain], outputs=[nxt["q"], nxt["qd"]], device=DEVICE
        )
        state = nxt
    return state


def objective_np(gain, q0, qd0, targets):
    q, qd, total = q0.copy(), qd0.copy(), 0.0
    for target in targets:
        for _ in range(STEPS):
            qd = qd + DT * (1.0 - gain * q - np.sin(q))
            q = q + DT * qd
        total += float(np.sum((q - target) ** 2))
    return total


def central_differences(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2.0 * eps)
    return g
