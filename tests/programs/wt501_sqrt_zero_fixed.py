"""Fixed twin of wt501_sqrt_zero: the squared radius is computed directly, no sqrt round trip.

The radius ``r = sqrt(x)`` is squared again downstream, so the loss is simply the sum of
``x`` and its true gradient is 1 everywhere. At ``x == 0`` the forward value is a
harmless 0, but the adjoint of ``wp.sqrt`` is ``0.5 / sqrt(0) = inf``, multiplied by the
incoming ``2 r = 0``: NaN in ``x.grad``.
"""
# check-numerics

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def radius(x: wp.array(dtype=float), r: wp.array(dtype=float)):
    i = wp.tid()
    r[i] = x[i]


@wp.kernel
def energy(r: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, r[i])


def run() -> dict:
    x_np = np.array([1.0, 0.0, 9.0], dtype=np.float32)
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    r = wp.zeros(3, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(radius, dim=3, inputs=[x], outputs=[r], device=DEVICE)
        wp.launch(energy, dim=3, inputs=[r], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": x.grad.numpy().copy(), "expected": np.ones(3)}


if __name__ == "__main__":
    run()
