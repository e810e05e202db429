"""Look-alike: a @wp.func accumulates a diagnostic with an atomic; the adjoint replays it.

The adjoint of ``energy`` replays the body of ``deposit`` and adds into ``total`` a
second time during the backward. That changes forward memory, but no adjoint reads
``total`` afterwards and the kernel ignores the atomic's result (no counter handing out
slots), so every gradient is right: WT308 must stay silent (the shape of Newton's
joint-force kernels).
"""

import numpy as np
import warp as wp

wp.config.quiet = True


@wp.func
def deposit(total: wp.array(dtype=float), value: float):
    wp.atomic_add(total, 0, value)


@wp.kernel
def energy(
    x: wp.array(dtype=float), w: wp.array(dtype=float), e: wp.array(dtype=float), total: wp.array(dtype=float)
):
    i = wp.tid()
    v = x[i] * w[i]
    e[i] = v * v
    deposit(total, v)


@wp.kernel
def reduce(e: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, e[wp.tid()])


def run() -> dict:
    x_np = np.array([0.5, -1.0, 2.0, 1.5], dtype=np.float32)
    w_np = np.array([1.0, 0.3, -0.7, 0.2], dtype=np.float32)
    x = wp.array(x_np, dtype=float)
    w = wp.array(w_np, dtype=float, requires_grad=True)
    e = wp.zeros(4, dtype=float, requires_grad=True)
    total = wp.zeros(1, dtype=float)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(energy, 4, inputs=[x, w], outputs=[e, total])
        wp.launch(reduce, 4, inputs=[e], outputs=[loss])
    tape.backward(loss)
    return {"grad": w.grad.numpy(), "expected": 2.0 * x_np * x_np * w_np}


if __name__ == "__main__":
    run()
