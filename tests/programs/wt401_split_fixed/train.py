"""WT401 fixed: the normalized rows go to their own array."""

import numpy as np
import warp as wp
from wt401_normalize_fixed import normalize_rows

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def weighted_sum(values: wp.array2d[float], weights: wp.array2d[float], loss: wp.array[float]):
    row, col = wp.tid()
    wp.atomic_add(loss, 0, values[row, col] * weights[row, col])


def run() -> dict:
    v_np = np.array([[1.0, 2.0], [3.0, 4.0]])
    w_np = np.array([[0.5, 1.0], [2.0, -1.0]])
    n_np = np.array([2.0, 4.0])
    values = wp.array(v_np, dtype=float, requires_grad=True, device=DEVICE)
    weights = wp.array(w_np, dtype=float, device=DEVICE)
    norms = wp.array(n_np, dtype=float, requires_grad=True, device=DEVICE)
    out = wp.zeros((2, 2), dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(normalize_rows, (2, 2), [values, norms, out], device=DEVICE)
        wp.launch(weighted_sum, (2, 2), [out, weights, loss], device=DEVICE)
    tape.backward(loss)
    expected = -(v_np * w_np).sum(axis=1) / n_np**2
    return {"grad": norms.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
