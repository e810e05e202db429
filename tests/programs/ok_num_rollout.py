"""Look-alike of WT504: a time-stepping rollout is a chain of launches too, but not a solve.

``step`` advances positions under gravity, each step a launch reading the previous state
and writing a fresh one with the other inputs unchanged, exactly the signature of an
iterative solve, but the state moves farther each step instead of contracting to a fixed
point: no WT504.
"""
# check-numerics

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
STEPS = 8
DT = 0.1


@wp.kernel
def step(q: wp.array(dtype=wp.vec2), v0: wp.array(dtype=wp.vec2), t: float, q_next: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    q_next[i] = q[i] + DT * (v0[i] + wp.vec2(0.0, -9.8) * t)


@wp.kernel
def height(q: wp.array(dtype=wp.vec2), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i][1])


def run() -> dict:
    v0 = wp.array(
        np.array([[1.0, 5.0], [2.0, 3.0]], dtype=np.float32), dtype=wp.vec2, requires_grad=True, device=DEVICE
    )
    states = [wp.zeros(2, dtype=wp.vec2, requires_grad=True, device=DEVICE) for _ in range(STEPS + 1)]
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        for k in range(STEPS):
            wp.launch(step, dim=2, inputs=[states[k], v0, DT * k], outputs=[states[k + 1]], device=DEVICE)
        wp.launch(height, dim=2, inputs=[states[-1]], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    expected = np.array([[0.0, STEPS * DT], [0.0, STEPS * DT]])
    return {"grad": v0.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
