"""Differentiable kernels of the wt307_module program, and a helper hiding the clip launch."""

import warp as wp
import wt307_module_fastmath as fastmath

DEVICE = "cpu"


@wp.kernel
def thrust(control: wp.array(dtype=wp.vec2), mass: wp.array(dtype=float), vel: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    vel[i] = control[i] / mass[i]


@wp.kernel
def travel(
    vel: wp.array(dtype=wp.vec2),
    start: wp.array(dtype=wp.vec2),
    goal: wp.array(dtype=wp.vec2),
    loss: wp.array(dtype=float),
):
    i = wp.tid()
    d = start[i] + vel[i] - goal[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


def clip_velocity(vel, limit, out):
    wp.launch(fastmath.soft_clip, vel.shape[0], [vel, limit], [out], device=DEVICE)  # expect: WT307
