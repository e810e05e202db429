"""Fixed twin of wt104_struct_diverges: each step writes a fresh struct with its own array, so
every adjoint reads its own state; the calibration converges at the same step size.
"""
# check-numerics

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
N = 3
T = 8
GROWTH = 1.5
STEPS = 40
LR = 3.4e-4
TRUE_GAIN = 0.8


@wp.struct
class State:
    x: wp.array(dtype=float)


@wp.kernel
def advance(state: State, next_state: State):
    i = wp.tid()
    next_state.x[i] = GROWTH * state.x[i]


@wp.kernel
def fit(
    state: State, gain: wp.array(dtype=float), obs: wp.array(dtype=float), t: int, loss: wp.array(dtype=float)
):
    i = wp.tid()
    d = gain[0] * state.x[i] - obs[t * N + i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(p: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * grad[i]


def run() -> dict:
    x0 = np.array([0.4, 1.1, 0.7], dtype=np.float32)
    path = np.array([x0 * GROWTH**t for t in range(1, T + 1)], dtype=np.float64)
    obs = wp.array((TRUE_GAIN * path).reshape(-1).astype(np.float32), dtype=float, device=DEVICE)
    gain = wp.array([0.2], dtype=float, requires_grad=True, device=DEVICE)
    states = [State() for _ in range(T + 1)]
    for state in states:
        state.x = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    first = None
    for _ in range(STEPS):
        states[0].x.assign(x0)
        loss.zero_()
        tape.reset()
        with tape:
            for t in range(T):
                wp.launch(advance, dim=N, inputs=[states[t], states[t + 1]], device=DEVICE)
                wp.launch(fit, dim=N, inputs=[states[t + 1], gain, obs, t], outputs=[loss], device=DEVICE)
        tape.backward(loss)
        if first is None:
            g = float(gain.numpy()[0])
            expected = np.array([np.sum(2.0 * (g * path - TRUE_GAIN * path) * path)])
            first = (gain.grad.numpy().copy(), expected)
        wp.launch(sgd, dim=1, inputs=[gain, gain.grad, LR], device=DEVICE)
        tape.zero()
    return {"grad": first[0], "expected": first[1]}


if __name__ == "__main__":
    run()
