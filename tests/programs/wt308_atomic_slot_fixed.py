"""WT308 fixed twin: the slot function gets a ``@wp.func_replay`` that returns the slot recorded in forward.

The forward still takes slots from the atomic counter, but remembers each thread's slot
in ``slots``; the replay function reads it back instead of counting again, so the
adjoint neither touches ``count`` nor scatters to the wrong slot.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


# Warp 1.19 names a replay function after a global per-name counter: keep this name unique in
# the process (no other @wp.func called claim_contact_slot), or the generated code fails to build.
@wp.func
def claim_contact_slot(count: wp.array[int], slots: wp.array[int], tid: int):
    slot = wp.atomic_add(count, 0, 1)
    slots[tid] = slot
    return slot


@wp.func_replay(claim_contact_slot)
def replay_claim_contact_slot(count: wp.array[int], slots: wp.array[int], tid: int):
    return slots[tid]


@wp.kernel
def emit(
    depth: wp.array[float],
    stiffness: wp.array[float],
    count: wp.array[int],
    slots: wp.array[int],
    contact_force: wp.array[float],
):
    tid = wp.tid()
    slot = claim_contact_slot(count, slots, tid)
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
        wp.launch(
            emit, dim=n, inputs=[depth, stiffness, count, slots], outputs=[contact_force], device=DEVICE
        )
        wp.launch(contact_energy, dim=capacity, inputs=[contact_force, count], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    f = k_np * d_np**2
    expected = f * d_np**2
    return {"grad": stiffness.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
