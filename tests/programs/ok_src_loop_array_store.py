"""Look-alike: a dynamic loop that stores into an array, naming the array in the stored value.

``scale_rows`` copies a scaled row into ``out`` with ``out[i, k] = out.dtype(...)`` in a
loop over a runtime column count: the name ``out`` is read (its ``dtype``) and written in
every iteration, but it is an array, not a value the loop carries, and each iteration
stores a different element. Warp's replay of the dynamic loop is exact here (the same
shape as ``_bsr_assign_copy_blocks`` in ``warp.sparse``).
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
ROWS, COLS = 2, 3


@wp.kernel
def scale_rows(x: wp.array2d(dtype=float), cols: int, scale: float, out: wp.array2d(dtype=float)):
    i = wp.tid()
    row = out
    for k in range(cols):
        out[i, k] = out.dtype(scale * x[i, k])
        row[i, k] = row[i, k] * 1.0


@wp.kernel
def objective(out: wp.array2d(dtype=float), loss: wp.array(dtype=float)):
    i, k = wp.tid()
    v = out[i, k]
    wp.atomic_add(loss, 0, v * v)


def run() -> dict:
    x_np = np.array([[1.0, -2.0, 0.5], [3.0, 0.25, -1.0]])
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    out = wp.zeros((ROWS, COLS), dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(scale_rows, ROWS, [x, COLS, 2.0, out], device=DEVICE)
        wp.launch(objective, (ROWS, COLS), [out], [loss], device=DEVICE)
    tape.backward(loss)
    expected = 2.0 * (2.0 * x_np) * 2.0
    return {"grad": x.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
