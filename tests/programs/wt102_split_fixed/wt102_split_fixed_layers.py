"""Layers of the wt102_split_fixed program; the activation writes a new array."""

import warp as wp

IN_DIM = 3


@wp.func
def softsign(x: float):
    return x / (1.0 + wp.abs(x))


@wp.kernel
def dense(
    x: wp.array(dtype=float),
    weights: wp.array2d(dtype=float),
    bias: wp.array(dtype=float),
    h: wp.array(dtype=float),
):
    i = wp.tid()
    acc = bias[i]
    for j in range(IN_DIM):
        acc += weights[i, j] * x[j]
    h[i] = acc


@wp.kernel
def softsign_out(h: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = softsign(h[i])


def activate(h):
    """Apply the activation into a fresh array."""
    y = wp.empty_like(h)
    wp.launch(softsign_out, dim=h.shape[0], inputs=[h], outputs=[y], device=h.device)
    return y
