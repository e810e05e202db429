"""Look-alike (WT405): the old values atomics return, stored as data or added, never used as
an index, in a branch or as a factor. The adjoints of those uses never read the value
(measured on Warp 1.19, tests/test_warp_mechanisms_atomics.py), so the gradient is exact.

`relax` lowers each slot's best cost to the candidate's (`wp.atomic_min`) and logs the
previous best (stored as data, the shape of Warp's own test_special_values); `stamp` hands
out arrival tickets (`wp.atomic_add` on a counter) kept in an int array and added to a
score. The loss is the sum of the best costs and of the scores."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def relax(best: wp.array[float], cost: wp.array[float], previous: wp.array[float]):
    i = wp.tid()
    previous[i] = wp.atomic_min(best, i, cost[i])


@wp.kernel
def stamp(x: wp.array[float], counter: wp.array[int], ticket: wp.array[int], score: wp.array[float]):
    i = wp.tid()
    t = wp.atomic_add(counter, 0, 1)
    ticket[i] = t
    score[i] = x[i] * x[i] + float(t)


@wp.kernel
def total(a: wp.array[float], b: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, a[i] + b[i])


def run() -> dict:
    best_np = np.array([5.0, 2.0, 5.0, 1.0])
    cost_np = np.array([2.0, 5.0, 1.0, 3.0])
    x_np = np.array([1.0, 2.0, 3.0, 4.0])
    best = wp.array(best_np, dtype=float, requires_grad=True, device=DEVICE)
    cost = wp.array(cost_np, dtype=float, requires_grad=True, device=DEVICE)
    previous = wp.zeros(4, dtype=float, device=DEVICE)
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    counter = wp.zeros(1, dtype=int, device=DEVICE)
    ticket = wp.zeros(4, dtype=int, device=DEVICE)
    score = wp.zeros(4, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(relax, 4, [best, cost, previous], device=DEVICE)
        wp.launch(stamp, 4, [x, counter, ticket, score], device=DEVICE)
        wp.launch(total, 4, [best, score], [loss], device=DEVICE)
    tape.backward(loss)
    grad = np.concatenate([cost.grad.numpy(), x.grad.numpy()])
    expected = np.concatenate([np.where(cost_np < best_np, 1.0, 0.0), 2.0 * x_np])
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
