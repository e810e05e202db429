"""WT403 fixed: the search runs over a wp.constant trip count, so Warp unrolls it and each
iteration's branch is replayed with that iteration's `best`."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
CANDIDATES = wp.constant(3)


@wp.kernel
def nearest(samples: wp.array[float], target: float, out: wp.array[float]):
    best = float(1.0e20)
    chosen = float(0.0)
    for k in range(CANDIDATES):
        d = (samples[k] - target) * (samples[k] - target)
        if d < best:
            best = d
            chosen = samples[k] * 3.0
    out[0] = chosen


def run() -> dict:
    samples = wp.array([2.0, 1.0, 3.0], dtype=float, requires_grad=True, device=DEVICE)
    out = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(nearest, 1, [samples, 0.0, out], device=DEVICE)
    tape.backward(loss=out)
    return {"grad": samples.grad.numpy().copy(), "expected": np.array([0.0, 3.0, 0.0])}


if __name__ == "__main__":
    run()
