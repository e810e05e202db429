"""WT405: the first particle to claim a grid cell deposits its weighted value there.

`wp.atomic_cas(owner, c, -1, i)` returns the cell's previous owner; the thread that sees
-1 won the cell. The adjoint kernel does not replay the atomic, so the returned value is
undefined there and the `if` takes another branch than the forward pass did: winners and
losers get the same gradient (measured: all zero), instead of `w[i]` for a winner and 0
for the others.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def deposit(
    x: wp.array[float],
    w: wp.array[float],
    cell: wp.array[int],
    owner: wp.array[int],
    cell_value: wp.array[float],
):
    i = wp.tid()
    c = cell[i]
    if wp.atomic_cas(owner, c, -1, i) == -1:  # expect: WT405
        cell_value[c] = w[i] * x[i]


@wp.kernel
def total(values: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, values[i])


def run() -> dict:
    x_np = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    w_np = np.array([0.5, 1.5, 2.0, 3.0, 1.0])
    cell_np = np.array([0, 1, 0, 2, 1])
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    w = wp.array(w_np, dtype=float, device=DEVICE)
    cell = wp.array(cell_np, dtype=int, device=DEVICE)
    owner = wp.full(3, -1, dtype=int, device=DEVICE)
    cell_value = wp.zeros(3, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(deposit, 5, [x, w, cell, owner, cell_value], device=DEVICE)
        wp.launch(total, 3, [cell_value, loss], device=DEVICE)
    tape.backward(loss)
    # the CPU runs the threads in order: the first particle of each cell wins it
    winners = owner.numpy()
    expected = np.where(winners[cell_np] == np.arange(5), w_np, 0.0)
    return {"grad": x.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
