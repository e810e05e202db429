"""WT502: a custom adjoint that assigns instead of accumulating.

``scaled_product(a, b)`` has a custom adjoint written with ``wp.adjoint[a] = ...``. With
distinct inputs that is harmless, but ``energy`` passes the same value twice (``v * v``):
the second assignment overwrites the first term and the gradient is half what it should be.
"""
# check-numerics

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.func
def scaled_product(a: float, b: float):
    return 0.5 * a * b


@wp.func_grad(scaled_product)
def adj_scaled_product(a: float, b: float, adj_ret: float):  # expect: WT502
    wp.adjoint[a] = adj_ret * 0.5 * b  # expect: WT404
    wp.adjoint[b] = adj_ret * 0.5 * a  # expect: WT404


@wp.kernel
def energy(v: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    s = v[i]
    wp.atomic_add(loss, 0, scaled_product(s, s))


def run() -> dict:
    v_np = np.array([1.0, -2.0, 0.5], dtype=np.float32)
    v = wp.array(v_np, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(energy, dim=3, inputs=[v], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": v.grad.numpy().copy(), "expected": v_np.astype(np.float64)}


if __name__ == "__main__":
    run()
