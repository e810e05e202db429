"""WT308: an atomic counter hands out output slots, and the adjoint replays it.

``emit`` appends one contact per thread to a fixed-capacity buffer, taking its slot
from ``reserve_contact_slot`` (a ``@wp.func`` around ``wp.atomic_add(count, 0, 1)``). In the
backward pass Warp replays the forward body, including the user function, so the
counter keeps counting (``count`` goes from n to 2n: the adjoint writes forward memory)
and each thread reads the adjoint of slot ``n + k`` instead of its own. Those slots
hold no gradient: ``stiffness`` gets zero gradient.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.func
def reserve_contact_slot(count: wp.array[int], slots: wp.array[int], tid: int):
    slot = wp.atomic_add(count, 0, 1)
    slots[tid] = slot
    return slot


@wp.kernel
def emit(
    depth: wp.array[float],
    stiffness: wp.array[float],
    count: wp.array[int],
    slots: wp.array[int],
    contact_force: wp.array[float],
):
    tid = wp.tid()
    slot = reserve_contact_slot(count, slots, tid)
    contact_force[slot] = stiffness[tid] * depth[tid] * depth[tid]


@wp.kernel
def contact_energy(contact_force: wp.array[float], count: wp.array[int], loss: wp.array[float]):
    i = wp.tid()
    if i < count[0]:
        f = contact_force[i]
        wp.atomic_add(loss, 0, 0.5 * f * f)


def run() -> dict:
    n, capacity = 4, 16
    d_np = np.array([0.5, 1.0, 0.2, 0.8])
    k_np = np.array([2.0, 1.0, 3.0, 0.5])
    depth = wp.array(d_np, dtype=float, device=DEVICE)
    stiffness = wp.array(k_np, dtype=float, requires_grad=True, device=DEVICE)
    count = wp.zeros(1, dtype=int, device=DEVICE)
    slots = wp.zeros(n, dtype=int, device=DEVICE)
    contact_force = wp.zeros(capacity, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(emit, n, [depth, stiffness, count, slots], [contact_force], device=DEVICE)  # expect: WT308
        wp.launch(contact_energy, dim=capacity, inputs=[contact_force, count], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    f = k_np * d_np**2
    expected = f * d_np**2
    return {"grad": stiffness.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
