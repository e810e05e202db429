"""Buffer identity is memory: views, aliases and zero-copy arrays resolve to their allocation."""

from __future__ import annotations

import gc

import numpy as np
import pytest
import warp as wp

import warptrace
from tests.test_record_common import DEVICE, Trace, matrix_kernel, store_kernel
from warptrace.trace.schema import (
    ARRAY_EXTERNAL,
    ARRAY_GRAD,
    ARRAY_OWNED,
    ARRAY_PREEXISTING,
    ARRAY_PTR_ALIAS,
    ARRAY_VIEW,
)


@pytest.fixture
def trace_path(tmp_path):
    yield tmp_path / "run.wtrace"
    warptrace.stop()


def _touch(*arrays):
    """One launch per array, so each gets an arrays row (rows are written at first use)."""
    for a in arrays:
        wp.launch(store_kernel, dim=1, inputs=[a, a], device=DEVICE)


def _row(trace, seq_index):
    launch = trace.launches("store_kernel")[seq_index]
    return trace.arrays[trace.access(launch["seq"], "x")["array_id"]]


def test_slices_and_transposes_resolve_to_the_owner(trace_path):
    warptrace.start(trace_path)
    base = wp.zeros(10, dtype=float, device=DEVICE)
    part = base[2:6]
    every_other = base[::2]
    grid = wp.zeros((3, 4), dtype=float, device=DEVICE)
    flipped = grid.transpose()
    _touch(base, part, every_other)
    out = wp.zeros(1, dtype=float, device=DEVICE)
    wp.launch(matrix_kernel, dim=(4, 3), inputs=[flipped, out], device=DEVICE)
    warptrace.stop()

    trace = Trace(trace_path)
    owner, view, strided = _row(trace, 0), _row(trace, 1), _row(trace, 2)
    assert owner["kind"] == ARRAY_OWNED and owner["label"] == "base"
    assert view["kind"] == ARRAY_VIEW and view["label"] == "part"
    assert view["alloc_id"] == owner["alloc_id"] and view["base_id"] == owner["array_id"]
    assert view["offset"] == 8 and view["shape"] == [4] and view["strides"] == [4]
    assert strided["alloc_id"] == owner["alloc_id"] and strided["strides"] == [8] and strided["shape"] == [5]

    (matrix,) = trace.launches("matrix_kernel")
    transposed = trace.arrays[trace.access(matrix["seq"], "m")["array_id"]]
    grid_alloc = [a for a in trace.allocs.values() if a["nbytes"] == 48]
    assert transposed["kind"] == ARRAY_VIEW and transposed["label"] == "flipped"
    assert transposed["shape"] == [4, 3] and transposed["strides"] == [4, 16]
    assert transposed["alloc_id"] in {a["alloc_id"] for a in grid_alloc}
    assert trace.arrays[transposed["base_id"]]["label"] == "grid"


def test_ptr_alias_resolves_by_address(trace_path):
    warptrace.start(trace_path)
    owner = wp.zeros(8, dtype=float, device=DEVICE)
    alias = wp.array(ptr=owner.ptr + 16, dtype=float, shape=(4,), device=DEVICE)
    _touch(owner, alias)
    warptrace.stop()
    trace = Trace(trace_path)
    owner_row, alias_row = _row(trace, 0), _row(trace, 1)
    assert alias_row["kind"] == ARRAY_PTR_ALIAS and alias_row["label"] == "alias"
    assert alias_row["alloc_id"] == owner_row["alloc_id"] and alias_row["offset"] == 16
    assert alias_row["base_id"] == -1


def test_numpy_zero_copy_arrays_share_an_external_allocation(trace_path):
    host = np.arange(8, dtype=np.float32)
    warptrace.start(trace_path)
    whole = wp.array(host, dtype=float, device=DEVICE, copy=False)
    tail = wp.array(host[4:], dtype=float, device=DEVICE, copy=False)
    _touch(whole, tail)
    warptrace.stop()
    trace = Trace(trace_path)
    whole_row, tail_row = _row(trace, 0), _row(trace, 1)
    assert whole_row["kind"] == tail_row["kind"] == ARRAY_EXTERNAL
    assert whole_row["alloc_id"] == tail_row["alloc_id"]
    assert tail_row["offset"] - whole_row["offset"] == 16
    assert trace.allocs[whole_row["alloc_id"]]["kind"] == "external"
    assert trace.allocs[whole_row["alloc_id"]]["nbytes"] == 32


def test_pointer_reuse_gets_a_new_alloc_id(trace_path):
    warptrace.start(trace_path)
    seen_ptrs: dict[int, int] = {}
    reused = False
    for _ in range(50):
        # 16 KiB: a size the rest of the process rarely allocates, so the freed block comes
        # back (64 bytes did not after a long test session: other allocations took it)
        a = wp.zeros(4096, dtype=float, device=DEVICE)
        _touch(a)
        reused = reused or a.ptr in seen_ptrs
        seen_ptrs[a.ptr] = seen_ptrs.get(a.ptr, 0) + 1
        del a
        gc.collect()
    warptrace.stop()
    assert reused, "the allocator never reused a pointer; the test proves nothing"
    trace = Trace(trace_path)
    rows = [_row(trace, i) for i in range(50)]
    assert len({r["alloc_id"] for r in rows}) == 50
    by_ptr: dict[int, set[int]] = {}
    for r in rows:
        by_ptr.setdefault(trace.allocs[r["alloc_id"]]["ptr"], set()).add(r["alloc_id"])
    assert any(len(ids) > 1 for ids in by_ptr.values())


def test_grads_know_their_owner(trace_path):
    warptrace.start(trace_path)
    weights = wp.zeros(4, dtype=float, device=DEVICE, requires_grad=True)
    window = weights[1:3]
    _touch(weights.grad, window.grad, window)
    warptrace.stop()
    trace = Trace(trace_path)
    grad_row, window_grad_row, window_row = _row(trace, 0), _row(trace, 1), _row(trace, 2)
    owner = trace.arrays[grad_row["grad_of"]]
    assert grad_row["kind"] == ARRAY_GRAD and grad_row["label"] == "weights.grad"
    assert owner["label"] == "weights" and owner["requires_grad"]
    assert window_grad_row["grad_of"] == window_row["array_id"]
    assert window_grad_row["alloc_id"] == grad_row["alloc_id"] and window_grad_row["offset"] == 4
    assert window_grad_row["label"] == "window.grad"


def test_arrays_created_before_start_are_registered_lazily(trace_path):
    early = wp.zeros(6, dtype=float, device=DEVICE)
    early_view = early[1:4]
    warptrace.start(trace_path)
    late_alias = wp.array(ptr=early.ptr + 8, dtype=float, shape=(2,), device=DEVICE)
    _touch(late_alias, early_view, early)
    warptrace.stop()
    trace = Trace(trace_path)
    alias_row, view_row, early_row = _row(trace, 0), _row(trace, 1), _row(trace, 2)
    assert early_row["kind"] == ARRAY_PREEXISTING and view_row["kind"] == ARRAY_PREEXISTING
    assert trace.allocs[early_row["alloc_id"]]["kind"] == "external"
    assert alias_row["alloc_id"] == view_row["alloc_id"] == early_row["alloc_id"]
    assert (alias_row["offset"], view_row["offset"]) == (8, 4)
    assert view_row["base_id"] == early_row["array_id"]


def test_arrays_created_before_start_are_numbered_in_address_order(trace_path):
    """The external allocations of arrays made before start() are numbered by address, not by
    the garbage collector's list order (which moves with its history): the same arrays get the
    same alloc ids in every session of a process."""
    early = [wp.zeros(n, dtype=float, device=DEVICE) for n in (3, 5, 7, 9)]
    for _ in range(2):
        gc.collect()  # moves the arrays between the collector's generations
        warptrace.start(trace_path)
        _touch(*early)
        warptrace.stop()
        trace = Trace(trace_path)
        ptrs = [trace.allocs[alloc_id]["ptr"] for alloc_id in sorted(trace.allocs)]
        ours = [trace.allocs[_row(trace, i)["alloc_id"]]["ptr"] for i in range(len(early))]
        assert ptrs == sorted(ptrs) and sorted(ours) == sorted(a.ptr for a in early)


def test_labels_from_the_assignment_line(trace_path):
    class Holder:
        pass

    holder = Holder()
    warptrace.start(trace_path)
    stage1 = wp.zeros(2, dtype=float, device=DEVICE)
    holder.q = wp.zeros(2, dtype=float, device=DEVICE)
    staging = wp.array([1.0, 2.0], dtype=float, device=DEVICE)
    _touch(stage1, holder.q, staging)
    warptrace.stop()
    trace = Trace(trace_path)
    assert [_row(trace, i)["label"] for i in range(3)] == ["stage1", "holder.q", "staging"]
    # the host staging array behind wp.array(data=...) is not named after the line
    (copy,) = trace.of_kind("copy")
    src = trace.arrays[trace.access(copy["seq"], "src")["array_id"]]
    assert src["label"] == "" and src["kind"] == ARRAY_EXTERNAL


def test_alias_of_memory_freed_before_any_lookup_is_external(trace_path):
    """Index inserts are deferred to the first lookup: an allocation that died before any
    lookup must not be found by a later alias of its address (as with eager inserts)."""
    warptrace.start(trace_path)
    keep = wp.zeros(64, dtype=float, device=DEVICE)
    dead = wp.zeros(64, dtype=float, device=DEVICE)
    ptr = dead.ptr
    del dead
    gc.collect()
    alias = wp.array(ptr=ptr, shape=(8,), dtype=float, device=DEVICE)
    # dim=0: registers the alias without touching the freed memory
    wp.launch(store_kernel, dim=0, inputs=[alias, alias], device=DEVICE)
    _touch(keep)
    warptrace.stop()
    trace = Trace(trace_path)
    dead_allocs = [a for a in trace.allocs.values() if a["ptr"] == ptr and a["kind"] == "owned"]
    assert len(dead_allocs) == 1
    launch = trace.launches("store_kernel")[0]
    alias_row = trace.arrays[trace.access(launch["seq"], "x")["array_id"]]
    assert alias_row["alloc_id"] != dead_allocs[0]["alloc_id"]
    assert trace.allocs[alias_row["alloc_id"]]["kind"] == "external"
