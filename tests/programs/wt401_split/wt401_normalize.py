"""Row normalization helpers (a @wp.func that divides an array element in place)."""

import warp as wp


@wp.func
def divide_row(values: wp.array2d[float], row: int, col: int, scale: float):
    values[row, col] /= scale  # expect: WT401


@wp.kernel
def normalize_rows(values: wp.array2d[float], norms: wp.array[float]):
    row, col = wp.tid()
    divide_row(values, row, col, norms[row])
