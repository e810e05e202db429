"""WT408 (info): weights snapped to a grid with `wp.round` before use.

The derivative of rounding is zero almost everywhere, so d loss / d weights is exactly
zero: correct, not a bug (finite differences across the steps would disagree without
proving anything). The report explains the zero gradient and names the
straight-through estimator as the remedy if a signal is wanted.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
# grad: right


@wp.kernel
def quantized_response(weights: wp.array[float], inputs: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    level = wp.round(weights[i] * 8.0) / 8.0  # expect: WT408
    wp.atomic_add(loss, 0, level * inputs[i])


def run() -> dict:
    weights = wp.array([0.3, 0.71, -0.2], dtype=float, requires_grad=True, device=DEVICE)
    inputs = wp.array([1.0, 2.0, 3.0], dtype=float, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(quantized_response, 3, [weights, inputs, loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": weights.grad.numpy().copy(), "expected": np.zeros(3)}


if __name__ == "__main__":
    run()
