"""A rigid-frame helper class whose @wp.func method edits a component after reading it."""

import warp as wp


class Frame:
    @wp.func
    def squash(p: wp.vec3):
        q = p
        height = q[2] * 2.0
        q[2] = p[2] * p[2]  # expect: WT402
        return q[2] + height

    def make_kernel(self):
        return penalty


@wp.kernel
def penalty(points: wp.array[wp.vec3], out: wp.array[float]):
    i = wp.tid()
    out[i] = Frame.squash(points[i])
