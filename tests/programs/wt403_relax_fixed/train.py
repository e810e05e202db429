"""WT403 fixed: the module option max_unroll = 32 unrolls the 24 steps; the gradient is exact."""

import numpy as np
import warp as wp
from wt403_solver_fixed import settle

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def total(values: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, values[i])


def reference(y0: np.ndarray, rate: float, steps: int = 24) -> np.ndarray:
    y, dy = y0.astype(np.float64), np.ones_like(y0, dtype=np.float64)
    for _ in range(steps):
        dy = dy * (1.0 - rate * np.cos(y))
        y = y - rate * np.sin(y)
    return dy


def run() -> dict:
    y_np = np.array([1.0, 2.0])
    start = wp.array(y_np, dtype=float, requires_grad=True, device=DEVICE)
    out = wp.zeros(2, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(settle, 2, [start, 0.3, out], device=DEVICE)
        wp.launch(total, 2, [out, loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": start.grad.numpy().copy(), "expected": reference(y_np, 0.3)}


if __name__ == "__main__":
    run()
