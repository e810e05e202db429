"""Fixed twin of wt403_after_loop_func: the function returns the raw sum of squares and the
kernel takes the root (Warp's documented workaround: calls are replayed, loops are not)."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
EPS = 1.0e-6


@wp.func
def sum_squares(x: wp.array[float], start: int, count: int):
    acc = float(0.0)
    for k in range(start, start + count):
        acc += x[k] * x[k]
    return acc


@wp.kernel
def row_rms(x: wp.array[float], width: int, out: wp.array[float]):
    i = wp.tid()
    acc = sum_squares(x, i * width, width)
    out[i] = wp.sqrt(acc / float(width) + EPS)


@wp.kernel
def total(values: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, values[i])


def run() -> dict:
    x_np = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
    rows, width = x_np.shape
    x = wp.array(x_np.ravel(), dtype=float, requires_grad=True, device=DEVICE)
    out = wp.zeros(rows, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(row_rms, rows, [x, width, out], device=DEVICE)
        wp.launch(total, rows, [out, loss], device=DEVICE)
    tape.backward(loss)
    acc = (x_np**2).sum(axis=1, keepdims=True)
    expected = x_np / (width * np.sqrt(acc / width + EPS))
    return {"grad": x.grad.numpy().reshape(rows, width).copy(), "expected": expected}


if __name__ == "__main__":
    run()
