"""Look-alike (WT405), in another module: a @wp.func method of a class returns an atomic
counter's old value (the arrival rank in a bin); the kernel stores it (an int array) and adds
it to the output, never indexing or branching with it or scaling a differentiable value by
it. The replay runs the method again (the counts double, which WT308 reports only where a
later launch reads them: none does), and the gradient is exact."""

import numpy as np
import warp as wp
from tally import Tally

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def total(values: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, values[i])


def run() -> dict:
    x_np = np.array([1.0, 2.0, 3.0, 4.0])
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    bins = wp.array([0, 1, 0, 0], dtype=int, device=DEVICE)
    counts = wp.zeros(2, dtype=int, device=DEVICE)
    rank = wp.zeros(4, dtype=int, device=DEVICE)
    out = wp.zeros(4, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    kernel = Tally().make_kernel()
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, 4, [x, bins, counts, rank, out], device=DEVICE)
        wp.launch(total, 4, [out, loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": x.grad.numpy().copy(), "expected": 2.0 * x_np}


if __name__ == "__main__":
    run()
