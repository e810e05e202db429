"""Launches from several Python threads are all recorded, with their own thread index."""

from __future__ import annotations

import threading

import pytest
import warp as wp

import warptrace
from tests.test_record_common import DEVICE, Trace, store_kernel
from warptrace.trace.reader import read_trace


@pytest.fixture
def trace_path(tmp_path, monkeypatch):
    # parts cut where the recorder flushes (the trace-writer process would gather them)
    monkeypatch.setenv("WARPTRACE_WRITER", "thread")
    yield tmp_path / "run.wtrace"
    warptrace.stop()


def test_two_threads(trace_path, monkeypatch):
    from warptrace.record import recorder, session

    monkeypatch.setattr(session, "FLUSH_EVENTS", 64)  # several parts while both threads append
    per_thread = 300
    warptrace.start(trace_path)
    rec = recorder.active()
    rec.flush_ev_len = 64 * session.EVENT_WIDTH
    x = wp.array([1.0, 2.0, 3.0], dtype=float, device=DEVICE)
    outputs = [wp.zeros(3, dtype=float, device=DEVICE) for _ in range(2)]
    wp.launch(store_kernel, dim=3, inputs=[x], outputs=[outputs[0]], device=DEVICE)  # main thread
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def work(out: wp.array) -> None:
        try:
            barrier.wait()
            for _ in range(per_thread):
                wp.launch(store_kernel, dim=3, inputs=[x], outputs=[out], device=DEVICE)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(out,)) for out in outputs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    warptrace.stop()
    assert not errors

    trace = Trace(trace_path)
    launches = trace.launches()
    assert len(launches) == 1 + 2 * per_thread
    assert launches[0]["thread"] == 0
    by_thread: dict[int, set[int]] = {}
    for event in launches[1:]:
        out_id = trace.access(event["seq"], "y")["array_id"]
        by_thread.setdefault(event["thread"], set()).add(out_id)
    assert sorted(by_thread) == [1, 2]
    assert all(len(ids) == 1 for ids in by_thread.values()), "a thread's launches name another's output"
    assert len({next(iter(ids)) for ids in by_thread.values()}) == 2
    seqs = [e["seq"] for e in trace.events]
    assert seqs == list(range(len(seqs)))
    assert {a["seq"] for a in trace.accesses} == {e["seq"] for e in launches} | {
        e["seq"] for e in trace.of_kind("copy")
    }
    assert len(list((trace_path / "events").glob("part-*.parquet"))) > 2


def test_long_open_event_flushes_in_seq_order(trace_path, monkeypatch):
    """An event whose seq was reserved (a copy in progress) while 4x a part of later events
    piles up: the parts written meanwhile hold only the rows below its seq, so the trace
    reads back in seq order with every row."""
    from warptrace.record import recorder, session

    monkeypatch.setattr(session, "FLUSH_EVENTS", 16)
    warptrace.start(trace_path)
    rec = recorder.active()
    rec.flush_ev_len = 16 * session.EVENT_WIDTH
    x = wp.array([1.0, 2.0, 3.0], dtype=float, device=DEVICE)
    y = wp.zeros(3, dtype=float, device=DEVICE)
    for _ in range(40):
        wp.launch(store_kernel, dim=3, inputs=[x], outputs=[y], device=DEVICE)
    held = rec.reserve()
    for _ in range(200):  # 12x a part while the reserved event is open
        wp.launch(store_kernel, dim=3, inputs=[x], outputs=[y], device=DEVICE)
    # the rows above it wait; later flushes do not rescan them while it stays open
    assert rec.held_below == held and len(rec.ev) >= 4 * rec.flush_ev_len
    rec.emit("copy", seq=held)
    for _ in range(10):
        wp.launch(store_kernel, dim=3, inputs=[x], outputs=[y], device=DEVICE)
    warptrace.stop()

    read_trace(trace_path)  # validates: event seqs increase across the parts as written
    trace = Trace(trace_path)
    assert len(trace.launches()) == 250
    copies = [e["seq"] for e in trace.of_kind("copy")]
    assert copies[-1] == held  # the first is wp.array's own upload
    assert {a["seq"] for a in trace.accesses} == {e["seq"] for e in trace.launches()} | set(copies[:-1])
    assert len(list((trace_path / "events").glob("part-*.parquet"))) > 2
