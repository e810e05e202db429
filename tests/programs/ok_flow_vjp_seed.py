"""Look-alike (fine): ``tape.backward(grads={y: ones})`` on a multi-element output whose
objective is exactly that seeded sum.

Warp documents ``grads=`` as the way to backpropagate a vector-Jacobian product; an
all-ones seed differentiates ``sum(y)``. Nothing in the program forms another objective
from ``y`` before the backward (its values are only checked afterwards), so there is no
reported objective the seed could contradict: WT304 stays silent. Compare
``wt304_grads_dict``, which reads the per-particle costs back and reports their mean.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 5


@wp.kernel
def cube(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i] * x[i]


def run() -> dict:
    x0 = np.linspace(-1.0, 1.5, N)
    x = wp.array(x0, dtype=float, requires_grad=True, device=DEVICE)
    y = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(cube, dim=N, inputs=[x], outputs=[y], device=DEVICE)
    tape.backward(grads={y: wp.ones_like(y)})

    assert np.allclose(y.numpy(), x0**3)  # the forward values, checked after the backward
    return {"grad": x.grad.numpy().copy(), "expected": 3.0 * x0 * x0}


if __name__ == "__main__":
    run()
