"""WT406: a softplus written with wp.where; the unselected `exp(z)` overflows.

For z = 100 the where selects `z`, but `wp.log(1 + wp.exp(z))` is still evaluated and its
adjoint runs with a zero seed: 0 * inf = NaN in d loss / d z while the forward is clean.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.func
def softplus(z: float):
    return wp.where(z > 20.0, z, wp.log(1.0 + wp.exp(z)))  # expect: WT406


@wp.kernel
def activate(pre: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, softplus(pre[i]))


def run() -> dict:
    z_np = np.array([-1.0, 0.5, 100.0])
    pre = wp.array(z_np, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(activate, 3, [pre, loss], device=DEVICE)
    tape.backward(loss)
    expected = np.where(z_np > 20.0, 1.0, 1.0 / (1.0 + np.exp(-np.minimum(z_np, 20.0))))
    return {"grad": pre.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
