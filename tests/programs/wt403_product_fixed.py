"""WT403 fixed: the trip count is a wp.constant, so Warp unrolls the loop and the adjoint
sees each iteration's value of `p`."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
COUNT = wp.constant(3)


@wp.kernel
def survival(rates: wp.array[float], out: wp.array[float]):
    p = float(1.0)
    for k in range(COUNT):
        p *= rates[k]
    out[0] = p


def run() -> dict:
    x_np = np.array([1.5, 2.0, 3.0])
    rates = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    out = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(survival, 1, [rates, out], device=DEVICE)
    tape.backward(grads={out: wp.ones(1, dtype=float, device=DEVICE)})
    expected = np.prod(x_np) / x_np
    return {"grad": rates.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
