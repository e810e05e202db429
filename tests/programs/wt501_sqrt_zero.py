"""WT501 in the adjoint only: ``wp.sqrt`` at exactly zero.

The radius ``r = sqrt(x)`` is squared again downstream, so the loss is simply the sum of
``x = 2 p`` and its true gradient with respect to ``p`` is 2 everywhere. At ``x == 0`` the forward value is a
harmless 0, but the adjoint of ``wp.sqrt`` is ``0.5 / sqrt(0) = inf``, multiplied by the
incoming ``2 r = 0``: NaN in ``x.grad``. The adjoint of ``spread`` then carries the NaN on
into ``p.grad``; that launch read a NaN gradient, so it is not reported: one finding, at
the origin.
"""
# check-numerics

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def spread(p: wp.array(dtype=float), x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = 2.0 * p[i]


@wp.kernel
def radius(x: wp.array(dtype=float), r: wp.array(dtype=float)):
    i = wp.tid()
    r[i] = wp.sqrt(x[i])  # expect: WT407


@wp.kernel
def energy(r: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, r[i] * r[i])


def run() -> dict:
    p_np = np.array([0.5, 0.0, 4.5], dtype=np.float32)
    p = wp.array(p_np, dtype=float, requires_grad=True, device=DEVICE)
    x = wp.zeros(3, dtype=float, requires_grad=True, device=DEVICE)
    r = wp.zeros(3, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(spread, dim=3, inputs=[p], outputs=[x], device=DEVICE)
        wp.launch(radius, dim=3, inputs=[x], outputs=[r], device=DEVICE)  # expect: WT501
        wp.launch(energy, dim=3, inputs=[r], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": p.grad.numpy().copy(), "expected": np.full(3, 2.0)}


if __name__ == "__main__":
    run()
