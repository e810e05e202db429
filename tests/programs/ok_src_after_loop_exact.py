"""Uses after a dynamic loop that the adjoint gets right, none of which may be reported as
more than info: a store and an accumulation of the total (linear: their adjoints never
look at it), a constant scaling, a product with a value that carries no gradient, unrolled
loops (a constant trip count within max_unroll, `wp.static`, a larger trip count with the
module option `max_unroll` raised), a loop under `if bias:` with `bias` null at the launch,
and a local the loop changes that is recomputed before its nonlinear use."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
WIDTH = wp.constant(4)
MANY = wp.constant(20)

wp.set_module_options({"max_unroll": 32})


@wp.kernel
def linear_uses(x: wp.array[float], count: int, scale: wp.array[float], out: wp.array[float]):
    s = float(1.0)
    for k in range(count):
        s += x[k]
    out[0] = s  # a store: exact
    out[1] = 2.0 * s  # scaled by a constant: exact
    out[2] = s * scale[0]  # scale carries no gradient: the adjoint of s does not need s
    wp.atomic_add(out, 3, s)


@wp.kernel
def unrolled(x: wp.array[float], out: wp.array[float]):
    s = float(1.0)
    for k in range(WIDTH):
        s += x[k]
    t = float(0.0)
    for k in range(MANY):  # 20 iterations, unrolled under max_unroll = 32
        t += x[k % WIDTH]
    u = float(0.0)
    for k in range(wp.static(2 * WIDTH)):
        u += x[k % WIDTH]
    out[0] = s * s + t * t + u * u


@wp.kernel
def optional_bias(x: wp.array[float], bias: wp.array[float], count: int, out: wp.array[float]):
    s = x[0]
    if bias:
        for k in range(count):
            s += bias[k]
    out[0] = s * s


@wp.kernel
def recomputed(x: wp.array[float], count: int, out: wp.array[float]):
    s = float(0.0)
    for k in range(count):
        s += x[k]
    out[0] = s
    s = x[0] + x[1]
    out[1] = s * s


@wp.kernel
def total(values: wp.array[float], weights: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, weights[i] * values[i])


def gradients(kernel, inputs, n_out, weights):
    x_np = np.array([0.5, -1.0, 2.0, 0.25])
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    out = wp.zeros(n_out, dtype=float, requires_grad=True, device=DEVICE)
    w = wp.array(weights, dtype=float, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, 1, [x, *inputs, out], device=DEVICE)
        wp.launch(total, n_out, [out, w, loss], device=DEVICE)
    tape.backward(loss)
    return x_np, x.grad.numpy().copy()


def run() -> dict:
    scale = wp.array([3.0], dtype=float, device=DEVICE)
    x_np, g_linear = gradients(linear_uses, [4, scale], 4, [1.0, 1.0, 1.0, 1.0])
    _, g_unrolled = gradients(unrolled, [], 1, [1.0])
    _, g_bias = gradients(optional_bias, [None, 4], 1, [1.0])
    _, g_recomputed = gradients(recomputed, [4], 2, [1.0, 1.0])
    s, t, u = 1.0 + x_np.sum(), 5.0 * x_np.sum(), 2.0 * x_np.sum()
    expected = np.concatenate(
        [
            np.full(4, 1.0 + 2.0 + 3.0 + 1.0),
            np.full(4, 2.0 * s + 2.0 * t * 5.0 + 2.0 * u * 2.0),
            np.array([2.0 * x_np[0], 0.0, 0.0, 0.0]),
            np.array([1.0, 1.0, 1.0, 1.0]) + np.array([2.0, 2.0, 0.0, 0.0]) * (x_np[0] + x_np[1]),
        ]
    )
    return {"grad": np.concatenate([g_linear, g_unrolled, g_bias, g_recomputed]), "expected": expected}


if __name__ == "__main__":
    run()
