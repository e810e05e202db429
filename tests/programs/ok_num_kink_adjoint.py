"""Look-alike of WT502: a correct custom adjoint of a function with a kink.

``hinge(x) = max(x, 0)`` with the custom adjoint "1 where x > 0": right everywhere but
at the kink, where finite differences straddle both sides. The values cross zero, so
the check samples near it; kink samples are skipped, nothing is reported.
"""
# check-numerics

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.func
def hinge(x: float):
    return wp.max(x, 0.0)


@wp.func_grad(hinge)
def adj_hinge(x: float, adj_ret: float):
    if x > 0.0:
        wp.adjoint[x] += adj_ret


@wp.kernel
def penalty(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, 3.0 * hinge(x[i]))


def run() -> dict:
    x_np = np.array([-1.5, -0.25, 0.0, 0.75, 2.0], dtype=np.float32)
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(penalty, dim=5, inputs=[x], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": x.grad.numpy().copy(), "expected": np.where(x_np > 0, 3.0, 0.0)}


if __name__ == "__main__":
    run()
