"""WT405 fixed: an untaped launch claims the cells and records each cell's owner; the taped
kernel reads the owners (an array, which the adjoint reads back exactly) and deposits only
the owner's value."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def claim(cell: wp.array[int], owner: wp.array[int]):
    i = wp.tid()
    wp.atomic_cas(owner, cell[i], -1, i)


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
    if owner[c] == i:
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
    wp.launch(claim, 5, [cell, owner], device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(deposit, 5, [x, w, cell, owner, cell_value], device=DEVICE)
        wp.launch(total, 3, [cell_value, loss], device=DEVICE)
    tape.backward(loss)
    winners = owner.numpy()
    expected = np.where(winners[cell_np] == np.arange(5), w_np, 0.0)
    return {"grad": x.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
