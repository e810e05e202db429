"""WT403 in a class's @wp.func method, in another module: a smooth maximum with a floor,
log(1 + sum exp(x)), whose loop and logarithm sit in the same method. In the adjoint of
`Stats.soft_max` the loop is skipped, so the logarithm's derivative is taken at the value
from before the loop (1.0): each gradient entry is exp(x_k) instead of exp(x_k) / (1 + sum).
Entry point of the wt403_after_loop_split program.
"""

import numpy as np
import warp as wp
from wt403_stats import Stats

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def row_soft_max(x: wp.array[float], width: int, loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, Stats.soft_max(x, i * width, width))


def run() -> dict:
    x_np = np.array([[0.1, -0.4, 0.3], [0.2, 0.5, -0.1]])
    rows, width = x_np.shape
    x = wp.array(x_np.ravel(), dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(row_soft_max, rows, [x, width, loss], device=DEVICE)
    tape.backward(loss)
    e = np.exp(x_np)
    expected = e / (1.0 + e.sum(axis=1, keepdims=True))
    return {"grad": x.grad.numpy().reshape(rows, width).copy(), "expected": expected}


if __name__ == "__main__":
    run()
