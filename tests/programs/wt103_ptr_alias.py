"""WT103: a viewer holds a ``wp.array(ptr=...)`` alias of the final state and edits it in place.

The viewer was handed a zero-copy view of the state at setup. Drawing converts the
positions to screen units in place, through the alias, after the tape recorded the
loss but before ``tape.backward``. The loss adjoint then reads screen coordinates.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 4
STEPS = 2
DT = 0.3
SCREEN_SCALE = 100.0


@wp.kernel
def advance(q: wp.array(dtype=float), w: wp.array(dtype=float), q_next: wp.array(dtype=float)):
    i = wp.tid()
    q_next[i] = q[i] + DT * wp.sin(w[i] * q[i])


@wp.kernel
def sum_squares(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i] * q[i])


@wp.kernel
def to_screen(pos: wp.array(dtype=float)):
    i = wp.tid()
    pos[i] = pos[i] * SCREEN_SCALE + 0.5 * SCREEN_SCALE


class Viewer:
    """Draws particle positions straight out of simulation memory (zero copy)."""

    def __init__(self, state: wp.array):
        self.positions = wp.array(ptr=state.ptr, shape=state.shape, dtype=float, device=state.device)

    def draw(self):
        pos = self.positions
        wp.launch(to_screen, dim=pos.shape[0], inputs=[pos], device=pos.device)  # expect: WT103


def reference_loss(w, q0):
    q = q0.astype(np.float64)
    for _ in range(STEPS):
        q = q + DT * np.sin(w * q)
    return np.sum(q * q)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    q0 = np.array([0.5, -0.9, 1.3, 0.2])
    w0 = np.array([1.0, 1.7, -0.6, 2.2])

    w = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
    states = [wp.array(q0, dtype=float, requires_grad=True, device=DEVICE)]
    states += [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(STEPS)]
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    viewer = Viewer(states[-1])

    tape = wp.Tape()
    with tape:
        for t in range(STEPS):
            wp.launch(advance, dim=N, inputs=[states[t], w], outputs=[states[t + 1]], device=DEVICE)
        wp.launch(sum_squares, dim=N, inputs=[states[-1]], outputs=[loss], device=DEVICE)
    viewer.draw()
    tape.backward(loss)

    expected = central_differences(lambda ww: reference_loss(ww, q0), w0)
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
