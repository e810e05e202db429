"""WT402 in a @wp.func method of a user class, in another module: `q = p` and then `q[2]` is
overwritten; Warp does not clear the adjoint of the old q[2] (= p[2]), so d/dz (z^2 + 2z)
comes out 2z + 3 instead of 2z + 2.
"""

import numpy as np
import warp as wp
from wt402_frames import Frame

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def total(values: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, values[i])


def run() -> dict:
    p_np = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 2.0]])
    points = wp.array(p_np, dtype=wp.vec3, requires_grad=True, device=DEVICE)
    out = wp.zeros(2, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    kernel = Frame().make_kernel()
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, 2, [points, out], device=DEVICE)
        wp.launch(total, 2, [out, loss], device=DEVICE)
    tape.backward(loss)
    expected = np.zeros_like(p_np)
    expected[:, 2] = 2.0 * p_np[:, 2] + 2.0
    return {"grad": points.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
