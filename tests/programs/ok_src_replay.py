"""Look-alike: an atomic counter inside a @wp.func that has a correct @wp.func_replay (the
replay returns the slot stored in the forward pass), plus atomics used only to accumulate.
The gradient is exact and nothing may be reported."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.func
def take_slot(count: wp.array[int], slots: wp.array[int], tid: int):
    slot = wp.atomic_add(count, 0, 1)
    slots[tid] = slot
    return slot


@wp.func_replay(take_slot)
def replay_take_slot(count: wp.array[int], slots: wp.array[int], tid: int):
    return slots[tid]


@wp.kernel
def emit(x: wp.array[float], count: wp.array[int], slots: wp.array[int], packed: wp.array[float]):
    i = wp.tid()
    slot = take_slot(count, slots, i)
    packed[slot] = x[i] * x[i]


@wp.kernel
def total(values: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, values[i])


def run() -> dict:
    x_np = np.array([1.0, 2.0, 3.0])
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    count = wp.zeros(1, dtype=int, device=DEVICE)
    slots = wp.zeros(3, dtype=int, device=DEVICE)
    packed = wp.zeros(3, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(emit, 3, [x, count, slots, packed], device=DEVICE)
        wp.launch(total, 3, [packed, loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": x.grad.numpy().copy(), "expected": 2.0 * x_np}


if __name__ == "__main__":
    run()
