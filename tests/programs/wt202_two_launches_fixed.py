"""WT202 fixed twin: the initial guess goes to its own buffer; ``pos`` (retain_grad) is written once."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def initial_guess(anchor: wp.array(dtype=float), w: wp.array(dtype=float), pos: wp.array(dtype=float)):
    i = wp.tid()
    pos[i] = anchor[i] * w[i]


@wp.kernel
def solve(anchor: wp.array(dtype=float), w: wp.array(dtype=float), pos: wp.array(dtype=float)):
    i = wp.tid()
    pos[i] = anchor[i] + wp.sqrt(1.0 + w[i] * w[i])


@wp.kernel
def potential(pos: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, 0.5 * pos[i] * pos[i])


def run() -> dict:
    n = 4
    a_np = np.array([0.5, -1.0, 2.0, 0.0])
    w_np = np.array([0.3, 1.5, -0.7, 2.0])
    anchor = wp.array(a_np, dtype=float, device=DEVICE)
    w = wp.array(w_np, dtype=float, requires_grad=True, device=DEVICE)
    guess = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)
    pos = wp.zeros(n, dtype=float, requires_grad=True, retain_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(initial_guess, dim=n, inputs=[anchor, w], outputs=[guess], device=DEVICE)
        wp.launch(solve, dim=n, inputs=[anchor, w], outputs=[pos], device=DEVICE)
        wp.launch(potential, dim=n, inputs=[pos], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    root = np.sqrt(1.0 + w_np * w_np)
    expected = (a_np + root) * w_np / root
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
