"""WT405: stream compaction with an atomic counter in the kernel body.

`slot = wp.atomic_add(count, 0, 1)` hands each thread an output slot. The adjoint kernel
does not replay the atomic (a side effect), so `slot` is not the forward's slot there:
every thread reads the adjoint of slot 0 and d loss / d x is wrong.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def compact(x: wp.array[float], count: wp.array[int], packed: wp.array[float]):
    i = wp.tid()
    if x[i] > 0.0:
        slot = wp.atomic_add(count, 0, 1)  # expect: WT405
        packed[slot] = x[i] * x[i]


@wp.kernel
def total(values: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, values[i])


def run() -> dict:
    x_np = np.array([1.0, -1.0, 2.0, 3.0])
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    count = wp.zeros(1, dtype=int, device=DEVICE)
    packed = wp.zeros(4, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(compact, 4, [x, count, packed], device=DEVICE)
        wp.launch(total, 4, [packed, loss], device=DEVICE)
    tape.backward(loss)
    expected = np.where(x_np > 0.0, 2.0 * x_np, 0.0)
    return {"grad": x.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
