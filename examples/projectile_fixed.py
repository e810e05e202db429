"""Fit the launch velocity of a projectile: the fixed twin of ``projectile.py``.

Every time step writes its own state buffers, so the tape replays each adjoint
against the values that step really read.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

STEPS = 16
DT = 0.05
GRAVITY = wp.constant(wp.vec3(0.0, -9.8, 0.0))
DRAG = 0.3


@wp.kernel
def integrate(
    q: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    q_out: wp.array(dtype=wp.vec3),
    v_out: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    speed = wp.length(v[i])
    a = GRAVITY - DRAG * speed * v[i]
    v_out[i] = v[i] + a * DT
    q_out[i] = q[i] + v_out[i] * DT


@wp.kernel
def distance(q: wp.array(dtype=wp.vec3), target: wp.vec3, loss: wp.array(dtype=float)):
    d = q[0] - target
    loss[0] = wp.dot(d, d)


@wp.kernel
def sgd(v: wp.array(dtype=wp.vec3), grad: wp.array(dtype=wp.vec3), lr: float):
    v[0] = v[0] - lr * grad[0]


def simulate_loss(v_start: np.ndarray, target: wp.vec3) -> float:
    """The same forward pass without a tape, on fresh buffers: the ground truth for FD."""
    q = wp.zeros(1, dtype=wp.vec3)
    v = wp.array([wp.vec3(*v_start)], dtype=wp.vec3)
    for _ in range(STEPS):
        q_next, v_next = wp.zeros_like(q), wp.zeros_like(v)
        wp.launch(integrate, 1, inputs=[q, v], outputs=[q_next, v_next])
        q, v = q_next, v_next
    loss = wp.zeros(1, dtype=float)
    wp.launch(distance, 1, inputs=[q, target], outputs=[loss])
    return float(loss.numpy()[0])


def finite_difference(v_start: np.ndarray, target: wp.vec3, eps: float = 1e-3) -> np.ndarray:
    grad = np.zeros(3)
    for k in range(3):
        step = np.zeros(3)
        step[k] = eps
        grad[k] = (simulate_loss(v_start + step, target) - simulate_loss(v_start - step, target)) / (2 * eps)
    return grad


def main() -> None:
    target = wp.vec3(4.0, 0.5, 0.0)
    v0 = wp.array([wp.vec3(2.0, 2.0, 0.0)], dtype=wp.vec3, requires_grad=True)
    q0 = wp.zeros(1, dtype=wp.vec3, requires_grad=True)
    # one state per step: nothing a recorded launch read is overwritten before backward
    states = [
        (wp.zeros(1, dtype=wp.vec3, requires_grad=True), wp.zeros(1, dtype=wp.vec3, requires_grad=True))
        for _ in range(STEPS)
    ]
    loss = wp.zeros(1, dtype=float, requires_grad=True)

    for it in range(30):
        tape = wp.Tape()
        with tape:
            q, v = q0, v0
            for step in range(STEPS):
                q_next, v_next = states[step]
                wp.launch(integrate, 1, inputs=[q, v], outputs=[q_next, v_next])
                q, v = q_next, v_next
            wp.launch(distance, 1, inputs=[q, target], outputs=[loss])
        tape.backward(loss)
        if it == 0:
            fd = finite_difference(v0.numpy()[0].astype(np.float64), target)
            print(f"dloss/dv0  tape {v0.grad.numpy()[0]}  finite differences {fd.astype(np.float32)}")
        wp.launch(sgd, 1, inputs=[v0, v0.grad, 0.1])
        tape.zero()
        if it % 10 == 0:
            print(f"iter {it:2d}  loss {loss.numpy()[0]:.4f}  v0 {v0.numpy()[0]}")
    print(f"final loss {loss.numpy()[0]:.4f}")


if __name__ == "__main__":
    main()
