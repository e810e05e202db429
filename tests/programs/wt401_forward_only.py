"""WT401 as info: the in-place gain runs on a tape that is never backpropagated.

The pattern is there (and would give a wrong gradient), but no gradient flows through it
in this run: the report keeps it as `info`, never as an error.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
# grad: right


@wp.kernel
def damp(velocity: wp.array[float], factor: wp.array[float]):
    i = wp.tid()
    velocity[i] *= factor[0]  # expect: WT401


def run() -> dict:
    velocity = wp.array([1.0, 2.0], dtype=float, requires_grad=True, device=DEVICE)
    factor = wp.array([0.5], dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(damp, 2, [velocity, factor], device=DEVICE)
    return {"grad": velocity.numpy().copy(), "expected": np.array([0.5, 1.0])}


if __name__ == "__main__":
    run()
