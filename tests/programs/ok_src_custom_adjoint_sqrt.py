"""Look-alike of WT407: ``wp.sqrt`` at a zero argument inside a ``@wp.func`` whose
``@wp.func_grad`` defines the derivative at zero; the gradient is exact and nothing may be
reported.

Warp differentiates a call of a function that has a custom adjoint with that adjoint
only: the built-in derivative of ``wp.sqrt`` (infinite at zero) never runs. Found on
Warp's own ``test_func.py`` (``safe_sqrt``).
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
# forbid-info


@wp.func
def root(x: float):
    return wp.sqrt(x)


@wp.func_grad(root)
def adj_root(x: float, adj_ret: float):
    if x > 0.0:
        wp.adjoint[x] += 0.5 / wp.sqrt(x) * adj_ret


@wp.kernel
def roots(x: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, root(x[i]))


def run() -> dict:
    x_np = np.array([0.0, 1.0, 4.0])
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(roots, 3, [x, loss], device=DEVICE)
    tape.backward(loss)
    expected = np.where(x_np > 0.0, 0.5 / np.sqrt(np.where(x_np > 0.0, x_np, 1.0)), 0.0)
    return {"grad": x.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    print(run())
