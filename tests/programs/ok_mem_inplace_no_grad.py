"""Look-alike (fine): an index array cleaned up in place by a kernel that carries no gradient.

``drop_out_of_range`` reads each index and overwrites the invalid ones with -1, in place,
on the tape. Its adjoint replays on the cleaned indices, but none of its arguments has a
gradient (integer arrays): the adjoint propagates nothing, so what it re-reads cannot
change any gradient. The loss's gradient flows through ``gather`` only.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"


@wp.kernel
def drop_out_of_range(idx: wp.array(dtype=int), n: int):
    i = wp.tid()
    j = idx[i]
    if j < 0 or j >= n:
        idx[i] = -1


@wp.kernel
def gather(x: wp.array(dtype=float), idx: wp.array(dtype=int), loss: wp.array(dtype=float)):
    i = wp.tid()
    j = idx[i]
    if j >= 0:
        wp.atomic_add(loss, 0, x[j] * x[j])


def run() -> dict:
    x_np = np.array([1.0, -2.0, 0.5])
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    idx = wp.array([0, 5, 2, -3], dtype=int, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(drop_out_of_range, dim=4, inputs=[idx, 3], device=DEVICE)
        wp.launch(gather, dim=4, inputs=[x, idx], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": x.grad.numpy().copy(), "expected": np.array([2.0, 0.0, 1.0])}


if __name__ == "__main__":
    run()
