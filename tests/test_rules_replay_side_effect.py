"""WT405 reports an atomic's returned value only where the adjoint reads it (an index, a
branch, a factor), as an error only where the trace shows a gradient through that use
(tests/test_warp_mechanisms_atomics.py measures each use)."""

from __future__ import annotations

import numpy as np
import warp as wp

import warptrace
from warptrace.analysis.findings import Severity

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def slot_index(x: wp.array[float], count: wp.array[int], out: wp.array[float]):
    i = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    out[slot] = x[i] * x[i]


@wp.kernel
def rank_factor(x: wp.array[float], count: wp.array[int], out: wp.array[float]):
    i = wp.tid()
    k = wp.atomic_add(count, 0, 1)
    out[i] = float(k + 1) * x[i]


@wp.kernel
def ids_only(x: wp.array[float], count: wp.array[int], ids: wp.array[int], out: wp.array[float]):
    i = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    ids[slot] = i
    out[i] = x[i] * x[i]


@wp.kernel
def previous_min(best: wp.array[float], cost: wp.array[float], previous: wp.array[float]):
    i = wp.tid()
    previous[i] = wp.atomic_min(best, i, cost[i])


def _wt405(tmp_path, kernel, backward: bool = True, *extra):
    x = wp.array(np.arange(1.0, 5.0), dtype=float, requires_grad=True, device=DEVICE)
    count = wp.zeros(1, dtype=int, device=DEVICE)
    out = wp.zeros(4, dtype=float, requires_grad=True, device=DEVICE)
    trace = tmp_path / "run.wtrace"
    warptrace.start(trace)
    try:
        tape = wp.Tape()
        with tape:
            wp.launch(kernel, 4, [x, count, *extra, out], device=DEVICE)
        if backward:
            tape.backward(grads={out: wp.ones_like(out)})
    finally:
        warptrace.stop()
    return [f for f in warptrace.analyze(trace).findings if f.code == "WT405"]


def test_an_index_into_a_differentiable_array_is_an_error(tmp_path):
    (found,) = _wt405(tmp_path, slot_index)
    assert found.severity == Severity.ERROR
    assert "uses as an index the value `atomic_add` on `count` returns" in found.message
    assert "the adjoint does not replay the atomic" in found.message
    assert found.location.text == "slot = wp.atomic_add(count, 0, 1)"


def test_a_factor_of_a_differentiable_value_is_an_error(tmp_path):
    (found,) = _wt405(tmp_path, rank_factor)
    assert found.severity == Severity.ERROR
    assert "multiplies a differentiable value by the value" in found.message


def test_without_a_backward_or_a_gradient_through_the_use_it_is_info(tmp_path):
    (found,) = _wt405(tmp_path, slot_index, False)
    assert found.severity == Severity.INFO
    ids = wp.zeros(4, dtype=int, device=DEVICE)
    (found,) = _wt405(tmp_path, ids_only, True, ids)  # an int array: no adjoint to misplace
    assert found.severity == Severity.INFO


def test_a_float_old_value_stored_into_a_differentiable_array_is_info(tmp_path):
    best = wp.array([5.0, 2.0, 5.0, 1.0], dtype=float, requires_grad=True, device=DEVICE)
    cost = wp.array([2.0, 5.0, 1.0, 3.0], dtype=float, requires_grad=True, device=DEVICE)
    previous = wp.zeros(4, dtype=float, requires_grad=True, device=DEVICE)
    trace = tmp_path / "run.wtrace"
    warptrace.start(trace)
    try:
        tape = wp.Tape()
        with tape:
            wp.launch(previous_min, 4, [best, cost, previous], device=DEVICE)
        tape.backward(grads={previous: wp.ones_like(previous), best: wp.ones_like(best)})
    finally:
        warptrace.stop()
    (found,) = [f for f in warptrace.analyze(trace).findings if f.code == "WT405"]
    assert found.severity == Severity.INFO
    assert "is stored into `previous`: it carries no gradient" in found.message
    assert found.fix.startswith("nothing to change unless the loss depends on the stored old value")
