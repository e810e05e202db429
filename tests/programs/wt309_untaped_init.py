"""WT309: the initial state is computed from the parameter above ``with tape:``.

A projectile's launch velocity comes from the parameter ``angle`` through ``launch_velocity``;
the flight is recorded on the tape and the loss reads the landing point. The first kernel
sits above ``with tape:``, so the backward stops at ``v0``: ``angle.grad`` stays zero, and
an optimizer fed with it never moves.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
STEPS = 20
DT = 0.05
SPEED = 10.0


@wp.kernel
def launch_velocity(angle: wp.array(dtype=float), v: wp.array(dtype=wp.vec2)):
    v[0] = SPEED * wp.vec2(wp.cos(angle[0]), wp.sin(angle[0]))


@wp.kernel
def fly(x: wp.array(dtype=wp.vec2), v: wp.array(dtype=wp.vec2), x_next: wp.array(dtype=wp.vec2)):
    x_next[0] = x[0] + DT * v[0]


@wp.kernel
def distance(x: wp.array(dtype=wp.vec2), loss: wp.array(dtype=float)):
    loss[0] = x[0][0]


def reference(angle: float) -> float:
    return STEPS * DT * SPEED * np.cos(angle)


def run() -> dict:
    angle = wp.array([0.3], dtype=float, requires_grad=True, device=DEVICE)
    v0 = wp.zeros(1, dtype=wp.vec2, requires_grad=True, device=DEVICE)
    xs = [wp.zeros(1, dtype=wp.vec2, requires_grad=True, device=DEVICE) for _ in range(STEPS + 1)]
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    wp.launch(launch_velocity, dim=1, inputs=[angle], outputs=[v0], device=DEVICE)  # expect: WT309
    tape = wp.Tape()
    with tape:
        for k in range(STEPS):
            wp.launch(fly, dim=1, inputs=[xs[k], v0], outputs=[xs[k + 1]], device=DEVICE)
        wp.launch(distance, dim=1, inputs=[xs[STEPS]], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    grad = angle.grad.numpy().copy()
    eps = 1e-4
    expected = np.array([(reference(0.3 + eps) - reference(0.3 - eps)) / (2 * eps)])
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
