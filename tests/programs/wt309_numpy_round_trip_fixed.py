"""Fixed twin of ``wt309_numpy_round_trip``: the next layer's input is copied with
``wp.clone`` (both arrays have gradients, so Warp records the copy and its adjoint) instead
of a round trip through numpy.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def scale(x: wp.array(dtype=float), w: wp.array(dtype=float), hidden: wp.array(dtype=float)):
    i = wp.tid()
    hidden[i] = w[i] * x[i]


@wp.kernel
def squares(h: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, h[i] * h[i])


def run() -> dict:
    x_np = np.array([1.0, 2.0, 3.0])
    w_np = np.array([0.5, -1.0, 2.0])
    x = wp.array(x_np, dtype=float, device=DEVICE)
    w = wp.array(w_np, dtype=float, requires_grad=True, device=DEVICE)
    hidden = wp.zeros(3, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(scale, dim=3, inputs=[x, w], outputs=[hidden], device=DEVICE)
        relay = wp.clone(hidden, requires_grad=True)
        wp.launch(squares, dim=3, inputs=[relay], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": w.grad.numpy().copy(), "expected": 2.0 * w_np * x_np**2}


if __name__ == "__main__":
    run()
