"""Statistics helpers of the wt403_after_loop_split_fixed program."""

import warp as wp


class Stats:
    @wp.func
    def exp_sum(x: wp.array[float], start: int, count: int):
        acc = float(1.0)
        for k in range(start, start + count):
            acc += wp.exp(x[k])
        return acc

    @wp.func
    def soft_max(x: wp.array[float], start: int, count: int):
        return wp.log(Stats.exp_sum(x, start, count))
