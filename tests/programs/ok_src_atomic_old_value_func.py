"""Look-alike (WT405): a @wp.func returns the old value of an atomic and the kernel stores it
as data (never as an index, in a branch or as a factor). The replay runs the function again
(`wp.atomic_max` with the same value: the peak does not change), and the adjoint of the
store never reads the value: the gradient is exact."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.func
def raise_peak(peak: wp.array[float], i: int, value: float):
    return wp.atomic_max(peak, i, value)


@wp.kernel
def track(x: wp.array[float], peak: wp.array[float], previous: wp.array[float]):
    i = wp.tid()
    previous[i] = raise_peak(peak, i, 2.0 * x[i])


@wp.kernel
def total(values: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, values[i])


def run() -> dict:
    x_np = np.array([1.0, 0.5, 3.0, 0.25])
    peak_np = np.array([1.0, 4.0, 1.0, 2.0])
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    peak = wp.array(peak_np, dtype=float, requires_grad=True, device=DEVICE)
    previous = wp.zeros(4, dtype=float, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(track, 4, [x, peak, previous], device=DEVICE)
        wp.launch(total, 4, [peak], [loss], device=DEVICE)
    tape.backward(loss)
    expected = np.where(2.0 * x_np > peak_np, 2.0, 0.0)
    return {"grad": x.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
