"""A fixed-count relaxation in a @wp.func: 24 steps exceed the default max_unroll (16)."""

import warp as wp

STEPS = wp.constant(24)


@wp.func
def relax(y0: float, rate: float):
    y = y0
    for _step in range(STEPS):
        y = y - rate * wp.sin(y)  # expect: WT403
    return y


@wp.kernel
def settle(start: wp.array[float], rate: float, out: wp.array[float]):
    i = wp.tid()
    out[i] = relax(start[i], rate)
