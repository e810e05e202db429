"""What Warp's adjoint does with the old value a ``wp.atomic_*`` returns (WT405's mechanism).

Measured on the installed Warp with few-line kernels, each gradient compared with the
analytic one. Warp 1.19 marks the atomics ``skip_replay``: the backward kernel does not run
them again, and the variable holding the returned value is declared there but never
assigned (an undefined value; ``adj_atomic_*`` also ignore the returned value's adjoint).
So a use whose adjoint reads the value breaks (index, branch, factor of a differentiable
value) and every other use is exact, for ``atomic_add``/``sub``/``min``/``max``/``exch``/
``cas`` alike; the old value of a float atomic carries no gradient. Inside a ``@wp.func``
the whole call is replayed instead: the atomic runs again.

Each kernel picks the atomic with ``op`` (the same branch in the forward pass and in the
replay), and the slots it reads back are a permutation (``PERM``), one element per thread.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
OPS = ("add", "sub", "min", "max", "exch", "cas")
PERM = np.array([2, 0, 3, 1])
X = np.array([1.0, 2.0, 3.0, 4.0])


@wp.kernel
def index_use(op: int, x: wp.array[float], slots: wp.array[int], out: wp.array[float]):
    i = wp.tid()
    k = 0
    if op == 0:
        k = wp.atomic_add(slots, i, 0)
    elif op == 1:
        k = wp.atomic_sub(slots, i, 0)
    elif op == 2:
        k = wp.atomic_min(slots, i, 1000)
    elif op == 3:
        k = wp.atomic_max(slots, i, -1000)
    elif op == 4:
        k = wp.atomic_exch(slots, i, slots[i])
    else:
        k = wp.atomic_cas(slots, i, -7, -7)
    out[k] = x[i] * x[i]


@wp.kernel
def branch_use(op: int, x: wp.array[float], slots: wp.array[int], out: wp.array[float]):
    i = wp.tid()
    k = 0
    if op == 0:
        k = wp.atomic_add(slots, i, 0)
    elif op == 1:
        k = wp.atomic_sub(slots, i, 0)
    elif op == 2:
        k = wp.atomic_min(slots, i, 1000)
    elif op == 3:
        k = wp.atomic_max(slots, i, -1000)
    elif op == 4:
        k = wp.atomic_exch(slots, i, slots[i])
    else:
        k = wp.atomic_cas(slots, i, -7, -7)
    if k > 1:
        out[i] = 3.0 * x[i]
    else:
        out[i] = 2.0 * x[i]


@wp.kernel
def factor_use(op: int, x: wp.array[float], slots: wp.array[int], out: wp.array[float]):
    i = wp.tid()
    k = 0
    if op == 0:
        k = wp.atomic_add(slots, i, 0)
    elif op == 1:
        k = wp.atomic_sub(slots, i, 0)
    elif op == 2:
        k = wp.atomic_min(slots, i, 1000)
    elif op == 3:
        k = wp.atomic_max(slots, i, -1000)
    elif op == 4:
        k = wp.atomic_exch(slots, i, slots[i])
    else:
        k = wp.atomic_cas(slots, i, -7, -7)
    out[i] = float(k) * x[i]


@wp.kernel
def additive_and_data_use(
    op: int, x: wp.array[float], slots: wp.array[int], ids: wp.array[int], out: wp.array[float]
):
    i = wp.tid()
    k = 0
    if op == 0:
        k = wp.atomic_add(slots, i, 0)
    elif op == 1:
        k = wp.atomic_sub(slots, i, 0)
    elif op == 2:
        k = wp.atomic_min(slots, i, 1000)
    elif op == 3:
        k = wp.atomic_max(slots, i, -1000)
    elif op == 4:
        k = wp.atomic_exch(slots, i, slots[i])
    else:
        k = wp.atomic_cas(slots, i, -7, -7)
    ids[i] = k
    out[i] = x[i] * x[i] + float(k)


@wp.kernel
def float_old_value(op: int, x: wp.array[float], slots: wp.array[float], out: wp.array[float]):
    i = wp.tid()
    old = 0.0
    if op == 0:
        old = wp.atomic_add(slots, i, 0.0)
    elif op == 1:
        old = wp.atomic_sub(slots, i, 0.0)
    elif op == 2:
        old = wp.atomic_min(slots, i, 1000.0)
    elif op == 3:
        old = wp.atomic_max(slots, i, -1000.0)
    elif op == 4:
        old = wp.atomic_exch(slots, i, slots[i])
    else:
        old = wp.atomic_cas(slots, i, -7.0, -7.0)
    out[i] = x[i] * x[i] + old


@wp.kernel
def stored_min(slot: wp.array[float], value: wp.array[float], out: wp.array[float]):
    # warp/tests/test_special_values.py test_atomic_minmax_adjoint
    i = wp.tid()
    out[i] = wp.atomic_min(slot, i, value[i])


@wp.func
def take_slot(count: wp.array[int]):
    return wp.atomic_add(count, 0, 1)


@wp.kernel
def func_data_use(x: wp.array[float], count: wp.array[int], ids: wp.array[int], out: wp.array[float]):
    i = wp.tid()
    ids[i] = take_slot(count)
    out[i] = x[i] * x[i]


@wp.kernel
def func_index_use(x: wp.array[float], count: wp.array[int], out: wp.array[float]):
    i = wp.tid()
    out[take_slot(count)] = x[i] * x[i]


def _run(kernel, op: int, slots: np.ndarray, extra=()) -> tuple[np.ndarray, wp.array, wp.array]:
    """d sum(out) / dx of one launch (out's gradient seeded with ones), out and the slots."""
    x = wp.array(X, dtype=float, requires_grad=True, device=DEVICE)
    dtype = float if slots.dtype.kind == "f" else int
    slot_arr = wp.array(slots, dtype=dtype, requires_grad=dtype is float, device=DEVICE)
    out = wp.zeros(len(X), dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, len(X), [op, x, slot_arr, *extra, out], device=DEVICE)
    out.grad.fill_(1.0)
    tape.backward()
    return x.grad.numpy().copy(), out, slot_arr


@pytest.mark.parametrize("op", range(len(OPS)), ids=OPS)
def test_old_value_as_index_scatters_adjoints_to_wrong_elements(op):
    grad, out, _ = _run(index_use, op, PERM.copy())
    assert np.allclose(out.numpy()[PERM], X**2)  # the forward pass is right
    assert not np.allclose(grad, 2.0 * X)  # measured [2, 0, 0, 0]: every thread read slot 0


@pytest.mark.parametrize("op", range(len(OPS)), ids=OPS)
def test_old_value_in_a_branch_takes_another_branch_in_the_adjoint(op):
    grad, out, _ = _run(branch_use, op, PERM.copy())
    truth = np.where(PERM > 1, 3.0, 2.0)
    assert np.allclose(out.numpy(), truth * X)
    assert not np.allclose(grad, truth)  # measured [2, 2, 2, 2]


@pytest.mark.parametrize("op", range(len(OPS)), ids=OPS)
def test_old_value_as_a_factor_gives_the_other_operand_a_wrong_adjoint(op):
    grad, out, _ = _run(factor_use, op, PERM.copy())
    assert np.allclose(out.numpy(), PERM * X)
    assert not np.allclose(grad, PERM.astype(float))  # measured 0 (NaN for a float atomic)


@pytest.mark.parametrize("op", range(len(OPS)), ids=OPS)
def test_old_value_stored_or_added_leaves_the_gradient_exact(op):
    ids = wp.zeros(len(X), dtype=int, device=DEVICE)
    grad, out, _ = _run(additive_and_data_use, op, PERM.copy(), extra=(ids,))
    assert np.array_equal(ids.numpy(), PERM)
    assert np.allclose(out.numpy(), X**2 + PERM)
    assert np.allclose(grad, 2.0 * X)


@pytest.mark.parametrize("op", range(len(OPS)), ids=OPS)
def test_float_old_value_carries_no_gradient(op):
    grad, out, slots = _run(float_old_value, op, PERM.astype(np.float32))
    assert np.allclose(out.numpy(), X**2 + PERM)
    assert np.allclose(grad, 2.0 * X)  # the other operand: exact
    # d out[i] / d slots[i] (the value the atomic read) is 1; Warp gives 0
    assert np.allclose(slots.grad.numpy(), 0.0)


def test_stored_min_as_in_warps_own_test_is_exact():
    """``out[i] = wp.atomic_min(slot, i, value[i])``: the gradient the test asserts (into
    ``value`` from ``slot``'s) is exact; the one through ``out`` is dropped."""
    for seed in ("slot", "out"):
        slot = wp.array([5.0, 2.0, 5.0, 1.0], dtype=float, requires_grad=True, device=DEVICE)
        value = wp.array([2.0, 5.0, 1.0, 3.0], dtype=float, requires_grad=True, device=DEVICE)
        out = wp.zeros(4, dtype=float, requires_grad=True, device=DEVICE)
        tape = wp.Tape()
        with tape:
            wp.launch(stored_min, 4, [slot, value, out], device=DEVICE)
        assert np.allclose(out.numpy(), [5.0, 2.0, 5.0, 1.0])
        (slot if seed == "slot" else out).grad.fill_(1.0)
        tape.backward()
        if seed == "slot":  # value won where it was smaller: d min / d value = 1 there
            assert np.allclose(value.grad.numpy(), [1.0, 0.0, 1.0, 0.0])
        else:  # d out[i] / d slot[i] = 1 in truth
            assert np.allclose(slot.grad.numpy(), 0.0)
            assert np.allclose(value.grad.numpy(), 0.0)


def test_in_a_function_the_replay_runs_the_atomic_again():
    count = wp.zeros(1, dtype=int, device=DEVICE)
    ids = wp.zeros(len(X), dtype=int, device=DEVICE)
    grad, _, _ = _run_func(func_data_use, count, ids)
    assert np.allclose(grad, 2.0 * X)  # stored as data: exact
    assert count.numpy()[0] == 2 * len(X)  # but the counter counted again in the backward pass
    count = wp.zeros(1, dtype=int, device=DEVICE)
    grad, out, _ = _run_func(func_index_use, count)
    assert np.allclose(np.sort(out.numpy()[: len(X)]), np.sort(X**2))
    assert not np.allclose(grad, 2.0 * X)  # as an index: the replay's slots are 4..7


def _run_func(kernel, count: wp.array, *extra: wp.array) -> tuple[np.ndarray, wp.array, None]:
    x = wp.array(X, dtype=float, requires_grad=True, device=DEVICE)
    # room for the slots a second count hands out; the loss is the sum of the first len(X)
    out = wp.zeros(2 * len(X), dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, len(X), [x, count, *extra, out], device=DEVICE)
    out.grad.assign(np.r_[np.ones(len(X)), np.zeros(len(X))])
    tape.backward()
    return x.grad.numpy().copy(), out, None
