"""WT406: `wp.where(valid, rho * wp.log(rho), 0.0)` guards the value, not the adjoint.

At an empty cell (density 0) the log is not selected, but its adjoint 1/0 times a zero seed
is NaN and lands in d loss / d density.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def entropy(density: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    rho = density[i]
    valid = rho > 0.0
    term = wp.where(valid, rho * wp.log(rho), 0.0)  # expect: WT406
    wp.atomic_add(loss, 0, term)


def run() -> dict:
    d_np = np.array([0.0, 0.5, 2.0])
    density = wp.array(d_np, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(entropy, 3, [density, loss], device=DEVICE)
    tape.backward(loss)
    safe = np.where(d_np > 0.0, d_np, 1.0)
    expected = np.where(d_np > 0.0, np.log(safe) + 1.0, 0.0)
    return {"grad": density.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
