"""WT402: a local vector's component assigned twice.

`axis[0]` is first set to the raw coordinate, then overwritten by its scaled value. Warp
updates the local in place and the adjoint of the first assignment sees the final
component: d loss / d x comes out as 4 instead of 3 per element.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def build_axis(x: wp.array[float], out: wp.array[float]):
    i = wp.tid()
    axis = wp.vec3(0.0)
    axis[0] = x[i]
    axis[0] = x[i] * 3.0  # expect: WT402
    axis[1] = 1.0
    out[i] = axis[0] + axis[2]


@wp.kernel
def total(values: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, values[i])


def run() -> dict:
    x = wp.array([1.0, 2.0], dtype=float, requires_grad=True, device=DEVICE)
    out = wp.zeros(2, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(build_axis, 2, [x, out], device=DEVICE)
        wp.launch(total, 2, [out, loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": x.grad.numpy().copy(), "expected": np.array([3.0, 3.0])}


if __name__ == "__main__":
    run()
