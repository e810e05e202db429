"""Statistics helpers of the wt403_after_loop_split program."""

import warp as wp


class Stats:
    @wp.func
    def soft_max(x: wp.array[float], start: int, count: int):
        acc = float(1.0)
        for k in range(start, start + count):
            acc += wp.exp(x[k])
        return wp.log(acc)  # expect: WT403
