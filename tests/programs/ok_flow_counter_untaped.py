"""Look-alike of WT308: an atomic counter assigns slots, but outside the tape.

Stream compaction (``collect_active``: ``slot = wp.atomic_add(count, 0, 1)``) runs
*before* the tape, on constant data, and only produces an index list. The taped
kernels gather through that list with deterministic indices, so no recorded launch
has a side effect to replay and the gradient is exact. The compaction order is not
deterministic in general; the loss does not depend on it.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def collect_active(active: wp.array(dtype=int), count: wp.array(dtype=int), index: wp.array(dtype=int)):
    i = wp.tid()
    if active[i] != 0:
        slot = wp.atomic_add(count, 0, 1)
        index[slot] = i


@wp.kernel
def gather_energy(
    index: wp.array(dtype=int),
    height: wp.array(dtype=float),
    weight: wp.array(dtype=float),
    energy: wp.array(dtype=float),
):
    k = wp.tid()
    i = index[k]
    energy[k] = weight[i] * height[i] * height[i]


@wp.kernel
def total(energy: wp.array(dtype=float), loss: wp.array(dtype=float)):
    k = wp.tid()
    wp.atomic_add(loss, 0, energy[k])


def run() -> dict:
    act_np = np.array([1, 0, 1, 1, 0, 1])
    h_np = np.array([0.5, 2.0, -1.0, 0.3, 0.7, 1.5])
    w_np = np.array([1.0, 2.0, 0.5, 3.0, 1.0, 0.2])
    n = len(act_np)
    active = wp.array(act_np, dtype=int, device=DEVICE)
    count = wp.zeros(1, dtype=int, device=DEVICE)
    index = wp.zeros(n, dtype=int, device=DEVICE)
    wp.launch(collect_active, dim=n, inputs=[active, count], outputs=[index], device=DEVICE)
    m = int(count.numpy()[0])

    height = wp.array(h_np, dtype=float, requires_grad=True, device=DEVICE)
    weight = wp.array(w_np, dtype=float, device=DEVICE)
    energy = wp.zeros(m, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(gather_energy, dim=m, inputs=[index, height, weight], outputs=[energy], device=DEVICE)
        wp.launch(total, dim=m, inputs=[energy], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = 2.0 * w_np * h_np * (act_np != 0)
    return {"grad": height.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
