"""WT403: a running product over a loop with a runtime trip count.

`range(count)` with `count` a kernel argument is a dynamic loop: the adjoint replays each
iteration with `p` at its final value, so d prod / d x[k] comes out as prod * x[k] / ...
wrong ([54, 18, 3] instead of [6, 4.5, 3] for x = [1.5, 2, 3]).
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def survival(rates: wp.array[float], count: int, out: wp.array[float]):
    p = float(1.0)
    for k in range(count):
        p *= rates[k]  # expect: WT403
    out[0] = p


def run() -> dict:
    x_np = np.array([1.5, 2.0, 3.0])
    rates = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    out = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(survival, 1, [rates, 3, out], device=DEVICE)
    tape.backward(grads={out: wp.ones(1, dtype=float, device=DEVICE)})
    expected = np.prod(x_np) / x_np
    return {"grad": rates.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
