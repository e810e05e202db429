"""WT309 through a copy: an intermediate taken to numpy and back inside the tape's scope.

``hidden = w * x`` is recorded, then the program builds the next layer's input with
``wp.array(hidden.numpy(), requires_grad=True)``. Warp records a copy only when both
arrays have gradients; the copy's source here is the array ``numpy()`` returned (on the
CPU a view of ``hidden``, without a gradient), so the tape never sees it: the backward
stops at ``relay`` and ``w`` gets no gradient.
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
        relay = wp.array(hidden.numpy(), dtype=float, requires_grad=True, device=DEVICE)  # expect: WT309
        wp.launch(squares, dim=3, inputs=[relay], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": w.grad.numpy().copy(), "expected": 2.0 * w_np * x_np**2}


if __name__ == "__main__":
    run()
