"""Fixed twin of wt502_assign_adjoint: the custom adjoint accumulates with +=.

``scaled_product(a, b)`` has a custom adjoint written with ``wp.adjoint[a] += ...``.
``energy`` passes the same value twice (``v * v``): both terms add into the one adjoint, and
the gradient is the full ``v`` (the buggy twin assigns with ``=``, so the second term
overwrites the first and the gradient is half).
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
def adj_scaled_product(a: float, b: float, adj_ret: float):
    wp.adjoint[a] += adj_ret * 0.5 * b
    wp.adjoint[b] += adj_ret * 0.5 * a


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
