"""Kernels of the wt301_model_fixed program."""

import warp as wp


@wp.kernel
def dense_tanh(inp: wp.array(dtype=float), w: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = wp.tanh(w[0] * inp[i] + w[1])


@wp.kernel
def linear(inp: wp.array(dtype=float), w: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = w[0] * inp[i] + w[1]


@wp.kernel
def mse(pred: wp.array(dtype=float), y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = pred[i] - y[i]
    wp.atomic_add(loss, 0, d * d / float(pred.shape[0]))
