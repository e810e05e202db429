"""Row normalization helpers writing to a separate output."""

import warp as wp


@wp.func
def divide_row(values: wp.array2d[float], out: wp.array2d[float], row: int, col: int, scale: float):
    out[row, col] = values[row, col] / scale


@wp.kernel
def normalize_rows(values: wp.array2d[float], norms: wp.array[float], out: wp.array2d[float]):
    row, col = wp.tid()
    divide_row(values, out, row, col, norms[row])
