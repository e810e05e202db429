"""Look-alike of WT402: subscript stores into locals bound to array views; every gradient
is exact and nothing may be reported.

A local bound to a slice of an array argument (``top = y[0:1, :]``) or to a row of a 2-d
array indexed by fewer indices than its dimensions (``bottom = y[1]``) is an array view:
``top[0, i] = ...`` stores into the array, it is not a component assignment of a local
vector (whose overwritten adjoint Warp would not clear). Found on Warp's own
``test_array.py`` (``scale_slice_2d``).
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
# forbid-info


@wp.kernel
def fill_rows(x: wp.array[float], y: wp.array2d[float]):
    i = wp.tid()
    top = y[0:1, :]
    top[0, i] = 2.0 * x[i]
    bottom = y[1]
    bottom[i] = x[i] * x[i]


@wp.kernel
def total(y: wp.array2d[float], loss: wp.array[float]):
    i, j = wp.tid()
    wp.atomic_add(loss, 0, y[i, j])


def run() -> dict:
    x_np = np.array([0.5, -1.0, 2.0])
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    y = wp.zeros((2, 3), dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(fill_rows, 3, [x, y], device=DEVICE)
        wp.launch(total, (2, 3), [y, loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": x.grad.numpy().copy(), "expected": 2.0 + 2.0 * x_np}


if __name__ == "__main__":
    print(run())
