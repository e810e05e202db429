"""Kernels of the wt306_optim_fixed program."""

import warp as wp


@wp.kernel
def rbf_predict(
    x: wp.array(dtype=float),
    centers: wp.array(dtype=float),
    amps: wp.array(dtype=float),
    pred: wp.array(dtype=float),
):
    i = wp.tid()
    s = float(0.0)
    for k in range(3):
        d = x[i] - centers[k]
        s += amps[k] * wp.exp(-d * d)
    pred[i] = s


@wp.kernel
def sq_error(pred: wp.array(dtype=float), y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = pred[i] - y[i]
    wp.atomic_add(loss, 0, d * d)
