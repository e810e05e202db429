"""The kernels of the fit: per-sample losses, their average, an update."""

import warp as wp


@wp.kernel
def sample_loss(
    p: wp.array(dtype=wp.vec2), x: wp.array(dtype=float), y: wp.array(dtype=float), out: wp.array(dtype=float)
):
    i = wp.tid()
    r = p[0][0] * x[i] * x[i] + p[0][1] - y[i]
    out[i] = 0.5 * r * r


@wp.kernel
def average_loss(losses: wp.array(dtype=float), total: wp.array(dtype=float)):
    i = wp.tid()
    total[0] += losses[i] / float(losses.shape[0])


@wp.kernel
def descend(p: wp.array(dtype=wp.vec2), g: wp.array(dtype=wp.vec2), rate: float):
    p[0] = p[0] - rate * g[0]
