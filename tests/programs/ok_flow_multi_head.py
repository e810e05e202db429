"""Look-alike (fine): one tape records two objectives and backpropagates each in turn.

``head_a`` and ``head_b`` both read the shared forward result; the tape is replayed with
``tape.backward(loss=loss_a)``, zeroed, then ``tape.backward(loss=loss_b)``. The launch
writing ``loss_b`` comes after ``loss_a`` is final, but it is not post-loss work: it
computes the objective of the second backward. During the first backward its adjoint
runs on a zero seed and changes nothing (WT105 stays silent).
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 3


@wp.kernel
def shared(x: wp.array(dtype=float), h: wp.array(dtype=float)):
    i = wp.tid()
    h[i] = wp.sin(x[i])


@wp.kernel
def head(h: wp.array(dtype=float), k: int, loss: wp.array(dtype=float)):
    loss[0] = h[k] * h[k]


def run() -> dict:
    x0 = np.array([0.3, -0.6, 1.2])
    x = wp.array(x0, dtype=float, requires_grad=True, device=DEVICE)
    h = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    loss_a = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    loss_b = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(shared, dim=N, inputs=[x], outputs=[h], device=DEVICE)
        wp.launch(head, dim=1, inputs=[h, 0], outputs=[loss_a], device=DEVICE)
        wp.launch(head, dim=1, inputs=[h, 2], outputs=[loss_b], device=DEVICE)
    tape.backward(loss=loss_a)
    grad_a = x.grad.numpy().copy()
    tape.zero()
    tape.backward(loss=loss_b)
    grad_b = x.grad.numpy().copy()

    s, c = np.sin(x0), np.cos(x0)
    expected_a = np.array([2.0 * s[0] * c[0], 0.0, 0.0])
    expected_b = np.array([0.0, 0.0, 2.0 * s[2] * c[2]])
    return {"grad": np.concatenate([grad_a, grad_b]), "expected": np.concatenate([expected_a, expected_b])}


if __name__ == "__main__":
    run()
