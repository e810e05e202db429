"""WT505: a correct gradient through an exploding recurrence, at too large a step size.

The initial states of four particles are fitted so that, after ``T`` steps of the recurrence
``x_{t+1} = 1.12 R(0.3) x_t`` (a rotation that also grows by 12 % per step), they land on
their targets. The recurrence amplifies everything by 1.12**20 = 9.6, so the objective is
stiff: its curvature is L = 2 * 1.12**40 = 186 in every direction, and the step size 0.016
is above 2/L = 0.0108. Each update overshoots by a factor |1 - 0.016 L| = 2: the loss grows
about fourfold per step until the squared distance overflows float32. The gradient is exact
and the overflowing kernel innocent: one divergence warning at the update, no WT501.
"""
# check-numerics
# grad: right

import math

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
N = 4
T = 20
STEPS = 70
LR = 0.016
GROWTH = 1.12
ANGLE = 0.3


@wp.kernel
def advance(x: wp.array(dtype=wp.vec2), x_next: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    c = wp.cos(ANGLE)
    s = wp.sin(ANGLE)
    p = x[i]
    x_next[i] = GROWTH * wp.vec2(c * p[0] - s * p[1], s * p[0] + c * p[1])


@wp.kernel
def miss(x: wp.array(dtype=wp.vec2), target: wp.array(dtype=wp.vec2), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


@wp.kernel
def sgd(x: wp.array(dtype=wp.vec2), grad: wp.array(dtype=wp.vec2), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * grad[i]


def true_grad(x0: np.ndarray, target: np.ndarray) -> np.ndarray:
    c, s = math.cos(ANGLE), math.sin(ANGLE)
    step = GROWTH * np.array([[c, -s], [s, c]])
    m = np.linalg.matrix_power(step, T)
    return 2.0 * (x0 @ m.T - target) @ m


def run() -> dict:
    x0 = np.array([[0.1, 0.0], [0.0, 0.1], [-0.1, 0.05], [0.05, -0.1]], dtype=np.float32)
    target_np = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.5], [0.5, -1.0]], dtype=np.float32)
    states = [wp.array(x0, dtype=wp.vec2, requires_grad=True, device=DEVICE)]
    states += [wp.zeros(N, dtype=wp.vec2, requires_grad=True, device=DEVICE) for _ in range(T)]
    target = wp.array(target_np, dtype=wp.vec2, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    first = None
    for _ in range(STEPS):
        loss.zero_()
        tape.reset()
        with tape:
            for t in range(T):
                wp.launch(advance, dim=N, inputs=[states[t]], outputs=[states[t + 1]], device=DEVICE)
            wp.launch(miss, dim=N, inputs=[states[T], target], outputs=[loss], device=DEVICE)
        tape.backward(loss)
        if first is None:
            first = (states[0].grad.numpy().copy(), true_grad(x0.astype(np.float64), target_np))
        wp.launch(sgd, dim=N, inputs=[states[0], states[0].grad, LR], device=DEVICE)  # expect: WT505
        tape.zero()
    return {"grad": first[0], "expected": first[1]}


if __name__ == "__main__":
    run()
