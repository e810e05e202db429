"""A rigid-frame helper class; the @wp.func method builds a fresh vector instead."""

import warp as wp


class Frame:
    @wp.func
    def squash(p: wp.vec3):
        height = p[2] * 2.0
        q = wp.vec3(p[0], p[1], p[2] * p[2])
        return q[2] + height

    def make_kernel(self):
        return penalty


@wp.kernel
def penalty(points: wp.array[wp.vec3], out: wp.array[float]):
    i = wp.tid()
    out[i] = Frame.squash(points[i])
