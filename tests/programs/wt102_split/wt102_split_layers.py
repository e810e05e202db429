"""Layers of the wt102_split program; the activation is applied in place by a helper."""

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
def softsign_inplace(h: wp.array(dtype=float)):
    i = wp.tid()
    h[i] = softsign(h[i])


def activate(h):
    """Apply the activation without allocating (saves a buffer per layer)."""
    wp.launch(softsign_inplace, dim=h.shape[0], inputs=[], outputs=[h], device=h.device)  # expect: WT102
    return h
