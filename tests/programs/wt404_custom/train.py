"""WT404: the custom adjoint of `cubic` assigns `wp.adjoint[x] = ...`; the other use of the
same local (`2.0 * v`) loses its contribution: d/dx (x^3 + 2x) comes out 3x^2, not 3x^2 + 2.
"""

import numpy as np
import warp as wp
from wt404_activations import activate

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def total(values: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, values[i])


def run() -> dict:
    x_np = np.array([0.5, 1.0, 2.0])
    pre = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    post = wp.zeros(3, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(activate, 3, [pre, post], device=DEVICE)
        wp.launch(total, 3, [post, loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": pre.grad.numpy().copy(), "expected": 3.0 * x_np**2 + 2.0}


if __name__ == "__main__":
    run()
