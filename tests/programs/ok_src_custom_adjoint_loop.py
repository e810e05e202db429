"""Look-alike of WT403 and WT401: a dynamic-loop product and an in-place ``*=`` inside a
``@wp.func`` whose ``@wp.func_grad`` gives the exact derivative; nothing may be reported.

Warp differentiates a call of a function that has a custom adjoint with that adjoint
only, so the loop's (wrong) built-in adjoint never runs: the body's hazards cannot reach
the gradient.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
# forbid-info


@wp.func
def power(x: float, n: int):
    p = float(1.0)
    for _k in range(n):
        p *= x
    return p


@wp.func_grad(power)
def adj_power(x: float, n: int, adj_ret: float):
    wp.adjoint[x] += float(n) * wp.pow(x, float(n - 1)) * adj_ret


@wp.kernel
def powers(x: wp.array[float], n: int, loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, power(x[i], n))


def run() -> dict:
    x_np = np.array([1.5, 2.0, 0.5])
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(powers, 3, [x, 3, loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": x.grad.numpy().copy(), "expected": 3.0 * x_np**2}


if __name__ == "__main__":
    print(run())
