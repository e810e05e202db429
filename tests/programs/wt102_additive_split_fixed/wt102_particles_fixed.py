"""Particle helpers of the wt102_additive_split_fixed program."""

import warp as wp


class Particles:
    @wp.func
    def kinetic(mass: wp.array[float], v: wp.array[float], i: int):
        return 0.5 * mass[i] * v[i] * v[i]
