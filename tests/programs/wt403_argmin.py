"""WT403 (warning): an argmin search in a dynamic loop.

`if d < best: best = d; chosen = ...` carries `best` across iterations of `range(count)`.
The adjoint replays each iteration with `best` at its final value, so the branch is taken
for the wrong iterations: the gradient of the chosen sample goes to the last candidate
instead of the nearest one.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def nearest(samples: wp.array[float], target: float, count: int, out: wp.array[float]):
    best = float(1.0e20)
    chosen = float(0.0)
    for k in range(count):
        d = (samples[k] - target) * (samples[k] - target)
        if d < best:  # expect: WT403
            best = d
            chosen = samples[k] * 3.0
    out[0] = chosen


def run() -> dict:
    samples = wp.array([2.0, 1.0, 3.0], dtype=float, requires_grad=True, device=DEVICE)
    out = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(nearest, 1, [samples, 0.0, 3, out], device=DEVICE)
    tape.backward(loss=out)
    return {"grad": samples.grad.numpy().copy(), "expected": np.array([0.0, 3.0, 0.0])}


if __name__ == "__main__":
    run()
