"""Kernels of the wt203_split_fixed program."""

import warp as wp


@wp.kernel
def hidden_layer(x: wp.array(dtype=float), w1: wp.array(dtype=float), h: wp.array(dtype=float)):
    i = wp.tid()
    h[i] = wp.tanh(w1[0] * x[i] + w1[1])


@wp.kernel
def output_layer(h: wp.array(dtype=float), w2: wp.array(dtype=float), pred: wp.array(dtype=float)):
    i = wp.tid()
    pred[i] = w2[0] * h[i] + w2[1]


@wp.kernel
def mse(pred: wp.array(dtype=float), y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = pred[i] - y[i]
    wp.atomic_add(loss, 0, d * d / float(pred.shape[0]))
