"""Fixed twin of wt101_pingpong_diverges: one buffer per step, so every adjoint reads its own
state; the calibration converges at the same step size.
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


@wp.kernel
def advance(x: wp.array(dtype=float), x_next: wp.array(dtype=float)):
    i = wp.tid()
    x_next[i] = GROWTH * x[i]


@wp.kernel
def fit(
    x: wp.array(dtype=float),
    gain: wp.array(dtype=float),
    obs: wp.array(dtype=float),
    t: int,
    loss: wp.array(dtype=float),
):
    i = wp.tid()
    d = gain[0] * x[i] - obs[t * N + i]
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
    bufs = [wp.array(x0, dtype=float, requires_grad=True, device=DEVICE)]
    bufs += [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(T)]
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    first = None
    for _ in range(STEPS):
        bufs[0].assign(x0)
        loss.zero_()
        tape.reset()
        with tape:
            for t in range(T):
                src, dst = bufs[t], bufs[t + 1]
                wp.launch(advance, dim=N, inputs=[src], outputs=[dst], device=DEVICE)
                wp.launch(fit, dim=N, inputs=[dst, gain, obs, t], outputs=[loss], device=DEVICE)
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
