"""WT405 fixed: the slots are handed out by an untaped launch and passed in as an array; the
taped kernel only reads them, so its adjoint uses the forward's slots."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def reserve(x: wp.array[float], count: wp.array[int], slots: wp.array[int]):
    i = wp.tid()
    slots[i] = -1
    if x[i] > 0.0:
        slots[i] = wp.atomic_add(count, 0, 1)


@wp.kernel
def compact(x: wp.array[float], slots: wp.array[int], packed: wp.array[float]):
    i = wp.tid()
    slot = slots[i]
    if slot >= 0:
        packed[slot] = x[i] * x[i]


@wp.kernel
def total(values: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, values[i])


def run() -> dict:
    x_np = np.array([1.0, -1.0, 2.0, 3.0])
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    count = wp.zeros(1, dtype=int, device=DEVICE)
    slots = wp.zeros(4, dtype=int, device=DEVICE)
    packed = wp.zeros(4, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    wp.launch(reserve, 4, [x, count, slots], device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(compact, 4, [x, slots, packed], device=DEVICE)
        wp.launch(total, 4, [packed, loss], device=DEVICE)
    tape.backward(loss)
    expected = np.where(x_np > 0.0, 2.0 * x_np, 0.0)
    return {"grad": x.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
