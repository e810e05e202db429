"""WT501 in the adjoint only: the unselected branch of ``wp.where`` is NaN.

``wp.where(x > 0, wp.sqrt(x), 0.0)`` evaluates ``wp.sqrt(x)`` for every element; the
forward discards the NaN of the negative ones, but the adjoint of ``wp.sqrt`` runs
anyway and multiplies the zero incoming gradient by a NaN derivative: ``x.grad`` is NaN
wherever ``x < 0`` although every value the program computed was finite.
"""
# check-numerics

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def soft_root(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.where(x[i] > 0.0, wp.sqrt(x[i]), 0.0)  # expect: WT406


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i])


def run() -> dict:
    x_np = np.array([4.0, -1.0, 0.25, -2.0], dtype=np.float32)
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    y = wp.zeros(4, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(soft_root, dim=4, inputs=[x], outputs=[y], device=DEVICE)  # expect: WT501
        wp.launch(total, dim=4, inputs=[y], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    expected = np.where(x_np > 0, 0.5 / np.sqrt(np.abs(x_np)), 0.0)
    return {"grad": x.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
