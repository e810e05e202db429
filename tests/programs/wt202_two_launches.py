"""WT202: an array with ``retain_grad=True`` written by two launches on one tape.

``pos`` first receives an initial guess (``pos = anchor * w``), then ``solve`` overwrites
it with the real value. Without ``retain_grad`` the store adjoint of ``solve`` would
consume ``pos.grad`` and the dead initial guess would get nothing. But ``pos`` keeps its
gradient (the user wanted to look at ``pos.grad``), so the adjoint of the overwritten
guess also fires and adds ``anchor * pos.grad`` to ``w.grad``: wrong.
"""

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
    pos = wp.zeros(n, dtype=float, requires_grad=True, retain_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(initial_guess, dim=n, inputs=[anchor, w], outputs=[pos], device=DEVICE)
        wp.launch(solve, dim=n, inputs=[anchor, w], outputs=[pos], device=DEVICE)  # expect: WT202
        wp.launch(potential, dim=n, inputs=[pos], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    root = np.sqrt(1.0 + w_np * w_np)
    expected = (a_np + root) * w_np / root
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
