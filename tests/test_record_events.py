"""Every memory effect is an event: copies, memsets, reads, captures, tape and attribute changes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import warp as wp
import warp.optim

import warptrace
from tests.test_record_common import (
    DEVICE,
    Trace,
    inplace_kernel,
    square_sum_kernel,
    store_kernel,
    tile_rows_kernel,
)
from warptrace.trace.schema import (
    BACKWARD,
    FLAG_GRAD,
    FLAG_STORE,
    FLAG_UNCERTAIN,
    FORWARD,
    ROLE_READ,
    ROLE_READWRITE,
    ROLE_WRITE,
)


@pytest.fixture
def trace_path(tmp_path):
    yield tmp_path / "run.wtrace"
    warptrace.stop()


def _line(marker: str) -> int:
    """Line number of the line in this file that ends with ``# <marker>``."""
    for number, text in enumerate(Path(__file__).read_text().splitlines(), start=1):
        if text.rstrip().endswith(f"# {marker}"):
            return number
    raise AssertionError(marker)


def test_copy_with_grads_records_the_nested_grad_copy_as_a_child(trace_path):
    warptrace.start(trace_path)
    src = wp.array([1.0, 2.0, 3.0], dtype=float, device=DEVICE, requires_grad=True)
    dest = wp.zeros(3, dtype=float, device=DEVICE, requires_grad=True)
    src.grad.fill_(5.0)
    tape = wp.Tape()
    with tape:
        wp.copy(dest, src)  # site:copy
    plain = wp.zeros(3, dtype=float, device=DEVICE)
    wp.copy(plain, src, dest_offset=1, src_offset=0, count=2)  # site:partial
    warptrace.stop()
    assert np.allclose(dest.grad.numpy(), [5, 5, 5])

    trace = Trace(trace_path)
    copies = trace.of_kind("copy")
    outer = next(c for c in copies if trace.site_line(c) == _line("site:copy") and c["parent"] == -1)
    child = next(c for c in copies if c["parent"] == outer["seq"])
    assert outer["recorded"] and not child["recorded"]
    assert child["seq"] > outer["seq"] and trace.site_line(child) == _line("site:copy")
    assert trace.label(trace.access(outer["seq"], "dest")["array_id"]) == "dest"
    dest_grad = trace.access(child["seq"], "dest")
    assert dest_grad["flags"] & FLAG_GRAD and dest_grad["role"] == ROLE_WRITE
    assert trace.label(dest_grad["array_id"]) == "dest.grad"
    assert trace.access(child["seq"], "src")["role"] == ROLE_READ
    (record_func,) = trace.of_kind("record_func")
    assert record_func["parent"] == outer["seq"] and record_func["recorded"]

    partial = next(c for c in copies if trace.site_line(c) == _line("site:partial"))
    assert json.loads(partial["detail"]) == {"dest_offset": 1, "src_offset": 0, "count": 2}
    assert not partial["recorded"] and partial["tape"] == -1
    seqs = [e["seq"] for e in trace.events]
    assert seqs == sorted(seqs) == list(range(len(seqs)))


def test_clone_assign_and_array_from_data_are_copies(trace_path):
    warptrace.start(trace_path)
    a = wp.array(np.ones(4, dtype=np.float32), dtype=float, device=DEVICE)  # site:from-data
    b = wp.clone(a)  # site:clone
    b.assign(np.zeros(4, dtype=np.float32))  # site:assign
    warptrace.stop()
    trace = Trace(trace_path)
    lines = sorted(trace.site_line(c) for c in trace.of_kind("copy"))
    assert lines == sorted([_line("site:from-data"), _line("site:clone"), _line("site:assign")])
    clone = next(c for c in trace.of_kind("copy") if trace.site_line(c) == _line("site:clone"))
    assert trace.label(trace.access(clone["seq"], "src")["array_id"]) == "a"
    assert trace.label(trace.access(clone["seq"], "dest")["array_id"]) == "b"


def test_loss_seed_and_tape_zero_memsets(trace_path):
    warptrace.start(trace_path)
    x = wp.array([1.0, 2.0], dtype=float, device=DEVICE, requires_grad=True)
    loss = wp.zeros(1, dtype=float, device=DEVICE, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square_sum_kernel, dim=2, inputs=[x], outputs=[loss], device=DEVICE)
    tape.backward(loss)  # site:backward
    tape.zero()  # site:zero
    x.fill_(3.0)  # site:fill
    warptrace.stop()

    trace = Trace(trace_path)
    memsets = trace.of_kind("memset")
    seed = next(m for m in memsets if m["phase"] == BACKWARD)
    assert seed["value"] == 1.0 and trace.site_line(seed) == _line("site:backward")
    (seed_access,) = trace.access_rows(seed["seq"])
    assert trace.label(seed_access["array_id"]) == "loss.grad"
    assert seed_access["role"] == ROLE_WRITE and seed_access["flags"] & FLAG_STORE
    (zero,) = trace.of_kind("tape_zero")
    zeroed = [m for m in memsets if m["parent"] == zero["seq"]]
    labels = {trace.label(trace.access_rows(m["seq"])[0]["array_id"]) for m in zeroed}
    assert labels == {"x.grad", "loss.grad"}
    assert all(m["tape"] == zero["tape"] and m["value"] == 0.0 for m in zeroed)
    fill = next(m for m in memsets if trace.site_line(m) == _line("site:fill"))
    assert fill["value"] == 3.0 and fill["phase"] == FORWARD
    # the zero-initialisation inside wp.zeros is part of the allocation, not an event
    assert len(memsets) == 1 + len(zeroed) + 1


def test_tape_zero_memsets_are_the_rows_of_zeroing_each_gradient(trace_path):
    """Tape.zero() records its memsets as one batch when it returns: the same rows, in the
    same order, as zeroing each gradient by hand, with zero()'s site, tape and parent."""
    warptrace.start(trace_path)
    xs = [wp.array([1.0, 2.0], dtype=float, device=DEVICE, requires_grad=True) for _ in range(3)]
    loss = wp.zeros(1, dtype=float, device=DEVICE, requires_grad=True)
    tape = wp.Tape()
    with tape:
        for x in xs:
            wp.launch(square_sum_kernel, dim=2, inputs=[x], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    for grad in tape.gradients.values():
        grad.zero_()  # site:by-hand
    tape.zero()  # site:batch
    tape.reset()  # site:reset
    wp.launch(square_sum_kernel, dim=2, inputs=[xs[0]], outputs=[loss], device=DEVICE)  # site:after
    warptrace.stop()

    trace = Trace(trace_path)
    memsets = trace.of_kind("memset")
    by_hand = [m for m in memsets if trace.site_line(m) == _line("site:by-hand")]
    (zero, nested) = trace.of_kind("tape_zero")
    (reset,) = trace.of_kind("tape_reset")
    batch = [m for m in memsets if m["parent"] == zero["seq"]]
    assert len(by_hand) == len(batch) == 4
    assert [e["seq"] for e in batch] == list(range(zero["seq"] + 1, zero["seq"] + 5))
    assert all(trace.site_line(m) == _line("site:batch") for m in batch)
    assert all(m["tape"] == zero["tape"] >= 0 and m["executed"] and m["value"] == 0.0 for m in batch)
    rows = [[(r["array_id"], r["role"], r["flags"]) for r in trace.access_rows(m["seq"])] for m in batch]
    assert rows == [
        [(r["array_id"], r["role"], r["flags"]) for r in trace.access_rows(m["seq"])] for m in by_hand
    ]
    # reset() zeroes through zero(): its memsets belong to the nested zero, at reset()'s line
    assert nested["parent"] == reset["seq"] and trace.site_line(nested) == _line("site:reset")
    in_reset = [m for m in memsets if m["parent"] == nested["seq"]]
    assert len(in_reset) == 4 and all(trace.site_line(m) == _line("site:reset") for m in in_reset)
    (after,) = [e for e in trace.of_kind("launch") if trace.site_line(e) == _line("site:after")]
    assert after["seq"] == in_reset[-1]["seq"] + 1
    seqs = [e["seq"] for e in trace.events]
    assert seqs == sorted(seqs) == list(range(len(seqs)))


def test_tape_events_and_backward_bracket(trace_path):
    warptrace.start(trace_path)
    x = wp.array([1.0, 2.0], dtype=float, device=DEVICE, requires_grad=True)
    y = wp.zeros(2, dtype=float, device=DEVICE, requires_grad=True)
    first, second = wp.Tape(), wp.Tape()
    with first:
        wp.launch(store_kernel, dim=2, inputs=[x], outputs=[y], device=DEVICE)
    with second:
        wp.launch(store_kernel, dim=2, inputs=[x], outputs=[y], device=DEVICE)
    first.backward(grads={y: wp.ones(2, dtype=float, device=DEVICE)})
    first.reset()
    warptrace.stop()

    trace = Trace(trace_path)
    kinds = [e["kind"] for e in trace.events if e["kind"].startswith(("tape", "backward"))]
    assert kinds[:6] == ["tape_create", "tape_create", "tape_enter", "tape_exit", "tape_enter", "tape_exit"]
    created = [e["tape"] for e in trace.of_kind("tape_create")]
    assert created == [0, 1]
    begin, end = trace.of_kind("backward_begin")[0], trace.of_kind("backward_end")[0]
    assert begin["tape"] == end["tape"] == 0 and begin["array_id"] == -1
    assert json.loads(begin["detail"])["grads"] == [trace.access(trace.launches()[0]["seq"], "y")["array_id"]]
    between = [e for e in trace.events if begin["seq"] < e["seq"] < end["seq"]]
    assert between and all(e["phase"] == BACKWARD and e["tape"] == 0 for e in between)
    assert [e["tape"] for e in trace.launches(adjoint=False)] == [0, 1]
    assert trace.of_kind("tape_reset")[0]["tape"] == 0


def test_value_reads_and_gradient_attribute_changes(trace_path):
    warptrace.start(trace_path)
    a = wp.zeros(3, dtype=float, device=DEVICE)
    a.numpy()  # site:numpy
    a.list()  # site:list
    a.requires_grad = True  # site:requires
    a.retain_grad = True  # site:retain
    replacement = wp.zeros(3, dtype=float, device=DEVICE)
    a.grad = replacement  # site:grad
    a.grad = None  # site:nograd
    warptrace.stop()

    trace = Trace(trace_path)
    reads = trace.of_kind("value_read")
    assert [trace.site_line(r) for r in reads] == [_line("site:numpy"), _line("site:list")]
    assert all(trace.label(r["array_id"]) == "a" for r in reads)
    assert trace.access_rows(reads[0]["seq"])[0]["role"] == ROLE_READ
    (requires,) = trace.of_kind("set_requires_grad")
    (retain,) = trace.of_kind("set_retain_grad")
    assert requires["value"] == 1.0 and retain["value"] == 1.0
    set_grad = trace.of_kind("set_grad")
    assert [trace.site_line(e) for e in set_grad] == [_line("site:grad"), _line("site:nograd")]
    assert trace.label(set_grad[0]["ref_id"]) == "replacement" and set_grad[1]["ref_id"] == -1
    assert trace.arrays[set_grad[0]["ref_id"]]["grad_of"] == set_grad[0]["array_id"]
    # requires_grad=True allocated a grad for `a`: linked to it although never used
    assert trace.arrays[requires["array_id"]]["requires_grad"] is False


def test_launch_tiled_record_cmd_and_optimizer_launches(trace_path):
    warptrace.start(trace_path)
    x = wp.array([1.0, 2.0], dtype=float, device=DEVICE, requires_grad=True)
    y = wp.zeros(2, dtype=float, device=DEVICE)
    wp.launch_tiled(tile_rows_kernel, dim=[2], inputs=[x, y], block_dim=1, device=DEVICE)  # site:tiled
    cmd = wp.launch(inplace_kernel, dim=2, inputs=[y], device=DEVICE, record_cmd=True)  # site:cmd
    cmd.launch()  # site:replay
    x.grad.fill_(1.0)
    optimizer = warp.optim.SGD([x], lr=0.5)
    optimizer.step([x.grad])  # site:step
    warptrace.stop()
    assert np.allclose(y.numpy(), [1.0, 1.5]) and np.allclose(x.numpy(), [0.5, 1.5])

    trace = Trace(trace_path)
    (tiled,) = trace.launches("tile_rows_kernel")
    assert trace.site_line(tiled) == _line("site:tiled") and tiled["dim"] == "2x1"
    assert not trace.launches("inplace_kernel"), "record_cmd=True executes nothing"
    (replay,) = trace.of_kind("cmd_launch")
    assert trace.site_line(replay) == _line("site:replay") and not replay["recorded"]
    assert trace.access(replay["seq"], "x")["role"] == ROLE_READWRITE
    step = [e for e in trace.launches() if trace.site_line(e) == _line("site:step")]
    assert len(step) == 1 and trace.kernels[step[0]["kernel"]]["module"].startswith("warp.")
    written = [a for a in trace.access_rows(step[0]["seq"]) if a["role"] & ROLE_WRITE]
    # SGD passes the parameters as inputs and writes them (and its momentum buffer, unnamed)
    assert {trace.label(a["array_id"]) for a in written} == {"x", ""}


def test_native_utilities_are_opaque_events(trace_path):
    warptrace.start(trace_path)
    values = wp.array([3, 1, 2, 0], dtype=int, device=DEVICE)
    scanned = wp.zeros(4, dtype=int, device=DEVICE)
    wp.utils.array_scan(values, scanned)  # site:scan
    keys = wp.array([3, 1, 2, 0, 0, 0, 0, 0], dtype=int, device=DEVICE)
    payload = wp.array([0, 1, 2, 3, 0, 0, 0, 0], dtype=int, device=DEVICE)
    wp.utils.radix_sort_pairs(keys, payload, 4)  # site:sort
    total = wp.utils.array_sum(wp.array([1.0, 2.0], dtype=float, device=DEVICE))
    warptrace.stop()
    assert scanned.numpy().tolist() == [3, 4, 6, 6] and keys.numpy()[:4].tolist() == [0, 1, 2, 3]
    assert total == 3.0

    trace = Trace(trace_path)
    natives = trace.of_kind("native")
    assert [json.loads(n["detail"])["func"] for n in natives] == [
        "array_scan",
        "radix_sort_pairs",
        "array_sum",
    ]
    scan, sort, _ = natives
    assert trace.site_line(scan) == _line("site:scan")
    assert trace.access(scan["seq"], "in_array")["role"] == ROLE_READ
    assert trace.access(scan["seq"], "out_array")["role"] == ROLE_WRITE
    assert trace.access(sort["seq"], "keys")["role"] == ROLE_READWRITE
    assert not any(a["flags"] & FLAG_UNCERTAIN for a in trace.access_rows(sort["seq"]))
    assert not trace.launches(), "the kernels Warp launches inside a utility are part of the NATIVE event"


def test_array_cast_is_its_launch_on_the_tape(trace_path):
    """``wp.utils.array_cast`` is Python over ``wp.launch``: Warp's tape records that launch
    and its backward replays it, so the trace has it as a recorded launch (one tape position
    per entry of ``tape.launches``), not as an opaque native event."""
    warptrace.start(trace_path)
    acc = wp.array([2.0], dtype=wp.float64, device=DEVICE, requires_grad=True)
    loss = wp.zeros(1, dtype=wp.float32, device=DEVICE, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.utils.array_cast(acc, loss)  # site:cast
    tape.backward(loss)
    entries = len(tape.launches)
    warptrace.stop()
    assert acc.grad.numpy().tolist() == [1.0]

    trace = Trace(trace_path)
    assert not trace.of_kind("native")
    (cast,) = [e for e in trace.launches() if not e["adjoint"]]
    assert cast["recorded"] and trace.site_line(cast) == _line("site:cast")
    assert trace.label(trace.access(cast["seq"], "src")["array_id"]) == "acc"
    assert trace.access(cast["seq"], "src")["role"] == ROLE_READ
    assert trace.access(cast["seq"], "dest")["role"] == ROLE_WRITE
    assert entries == 1


def test_tape_visualize_keeps_the_user_call_site(trace_path):
    warptrace.start(trace_path)
    x = wp.array([1.0, 2.0], dtype=float, device=DEVICE, requires_grad=True)
    y = wp.zeros(2, dtype=float, device=DEVICE, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(store_kernel, dim=2, inputs=[x], outputs=[y], device=DEVICE)  # site:taped
    caller = tape.launches[0][-1]["caller"]
    assert caller["file"] == __file__ and caller["lineno"] == _line("site:taped")
    assert caller["func"] == "test_tape_visualize_keeps_the_user_call_site"
    tape.visualize()
    warptrace.stop()


def _cpu_capture_supported() -> bool:
    wp.init()
    try:
        wp.capture_begin(device="cpu")
    except Exception:
        return False
    wp.capture_end(device="cpu")
    return True


def test_launches_inside_graph_capture_are_not_executed(trace_path):
    # CUDA graph capture needs a GPU; Warp >= 1.13 also captures on CPU (APIC). From 1.15
    # that has CUDA's semantics (recorded, not executed, replayed by capture_launch);
    # 1.13-1.14 run launches and memsets while capturing and replay only the launches.
    if not _cpu_capture_supported():
        pytest.skip("this Warp cannot capture on CPU and there is no CUDA device")
    version = tuple(int(p) for p in wp.config.version.split(".")[:2])
    runs_while_capturing = version < (1, 15)
    warptrace.start(trace_path)
    a = wp.zeros(4, dtype=float, device=DEVICE)
    wp.capture_begin(device=DEVICE)
    wp.launch(inplace_kernel, dim=4, inputs=[a], device=DEVICE)
    a.fill_(5.0)
    graph = wp.capture_end(device=DEVICE)
    before = a.numpy().copy()
    wp.capture_launch(graph)  # site:replay-graph
    warptrace.stop()
    if runs_while_capturing:
        assert before.tolist() == [5, 5, 5, 5] and a.numpy().tolist() == [2.5, 2.5, 2.5, 2.5]
    else:
        assert before.tolist() == [0, 0, 0, 0] and a.numpy().tolist() == [5, 5, 5, 5]

    trace = Trace(trace_path)
    (begin,), (end,) = trace.of_kind("capture_begin"), trace.of_kind("capture_end")
    graph_id = begin["ref_id"]
    assert end["ref_id"] == graph_id >= 0
    inside = [e for e in trace.events if begin["seq"] < e["seq"] < end["seq"]]
    assert [e["kind"] for e in inside] == ["launch", "memset"]
    launch, memset = inside
    assert launch["ref_id"] == graph_id and launch["executed"] == runs_while_capturing
    if runs_while_capturing:
        assert memset["executed"] and memset["ref_id"] == -1
    else:
        assert not memset["executed"] and memset["ref_id"] == graph_id
    (replay,) = trace.of_kind("capture_launch")
    assert replay["ref_id"] == graph_id and trace.site_line(replay) == _line("site:replay-graph")


def test_adjoint_launches_carry_the_backward_line_and_callbacks_their_own(trace_path):
    warptrace.start(trace_path)
    x = wp.array([1.0, 2.0], dtype=float, device=DEVICE, requires_grad=True)
    y = wp.zeros(2, dtype=float, device=DEVICE, requires_grad=True)
    loss = wp.zeros(1, dtype=float, device=DEVICE, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(store_kernel, dim=2, inputs=[x], outputs=[y], device=DEVICE)

        def callback() -> None:
            wp.launch(store_kernel, dim=2, inputs=[x], outputs=[y], device=DEVICE)  # site:bw-callback

        tape.record_func(callback, [x, y])
        wp.launch(square_sum_kernel, dim=2, inputs=[y], outputs=[loss], device=DEVICE)
    tape.backward(loss)  # site:bw-shortcut
    warptrace.stop()
    trace = Trace(trace_path)
    adjoint = trace.launches(adjoint=True)
    assert len(adjoint) == 2
    assert {trace.site_line(e) for e in adjoint} == {_line("site:bw-shortcut")}
    from_callback = [e for e in trace.launches(adjoint=False) if e["phase"] == BACKWARD]
    assert [trace.site_line(e) for e in from_callback] == [_line("site:bw-callback")]
