"""Look-alike of WT204: one recording, several backward calls (the rows of a Jacobian).

The forward is recorded once; each backward seeds one output with ``grads=`` and reads
the input's gradient, then ``tape.zero()``. The tape is never reset and is
backpropagated several times, but nothing is recorded between the backward calls:
every backward replays the same recording on purpose, and each row is right.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def model(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(y, i % 2, x[i] * x[i])


def run() -> dict:
    x_np = np.array([1.0, 2.0, 3.0, 4.0])
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    y = wp.zeros(2, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(model, dim=4, inputs=[x], outputs=[y], device=DEVICE)
    rows = []
    for j in range(2):
        seed = np.zeros(2)
        seed[j] = 1.0
        tape.backward(grads={y: wp.array(seed, dtype=float, device=DEVICE)})
        rows.append(x.grad.numpy().copy())
        tape.zero()
    expected = np.array([[2.0 * v if i % 2 == j else 0.0 for i, v in enumerate(x_np)] for j in range(2)])
    return {"grad": np.array(rows), "expected": expected}


if __name__ == "__main__":
    run()
