"""A per-bin tally class whose @wp.func method hands out the bin's running count."""

import warp as wp


class Tally:
    @wp.func
    def enter(counts: wp.array[int], b: int):
        return wp.atomic_add(counts, b, 1)

    def make_kernel(self):
        return weigh


@wp.kernel
def weigh(
    x: wp.array[float], bins: wp.array[int], counts: wp.array[int], rank: wp.array[int], out: wp.array[float]
):
    i = wp.tid()
    r = Tally.enter(counts, bins[i])
    rank[i] = r
    out[i] = x[i] * x[i] + float(r)
