"""The same relaxation, with the module's max_unroll raised so that Warp unrolls it."""

import warp as wp

wp.set_module_options({"max_unroll": 32})
STEPS = wp.constant(24)


@wp.func
def relax(y0: float, rate: float):
    y = y0
    for _step in range(STEPS):
        y = y - rate * wp.sin(y)
    return y


@wp.kernel
def settle(start: wp.array[float], rate: float, out: wp.array[float]):
    i = wp.tid()
    out[i] = relax(start[i], rate)
