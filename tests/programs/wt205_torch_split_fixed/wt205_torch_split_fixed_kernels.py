"""The Warp side of the layer: a kernel and the @wp.func it calls."""

import warp as wp


@wp.func
def smooth_abs(v: float):
    return wp.sqrt(v * v + 0.25)


@wp.kernel
def layer_kernel(x: wp.array(dtype=float), scale: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = scale[i] * smooth_abs(x[i])
