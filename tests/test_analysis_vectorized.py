"""Vectorized analysis helpers agree exactly with the plain loops and sorts they replace.

The analysis of traces with many graph replays (Newton's diffsim drone: 1200 replays, 6.7M
access rows) replaced per-event Python loops and large sorts by array code. Each test here
checks one replacement against the previous formulation on random or synthetic input.
"""

from __future__ import annotations

import numpy as np

from tests.tracebuilder import TraceBuilder
from warptrace.analysis.replay import _latest_copies, expand_captures
from warptrace.trace import schema as S
from warptrace.trace.reader import read_trace


def _latest_copies_loop(origin_seq: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """The loop expand_captures used: parents point at the most recent copy of the parent."""
    out = parent.copy()
    latest: dict[int, int] = {}
    for position, seq in enumerate(origin_seq.tolist()):
        latest[seq] = position
        if out[position] >= 0:
            out[position] = latest.get(int(out[position]), -1)
    return out


def test_latest_copies_matches_the_loop():
    rng = np.random.default_rng(2)
    for _ in range(500):
        n = int(rng.integers(0, 60))
        origin = rng.integers(0, 15, n)
        parent = rng.integers(-3, 17, n)
        assert np.array_equal(_latest_copies(origin, parent), _latest_copies_loop(origin, parent))


def _capture_trace(tmp_path) -> TraceBuilder:
    """A graph captured once (a launch, a tape.zero with its memset inside it) and replayed
    three times, with a launch between the replays."""
    tb = TraceBuilder()
    x = tb.array("x", requires_grad=True)
    y = tb.array("y", requires_grad=True)
    step = tb.kernel("step", x="r", y="w")
    tb.event(S.CAPTURE_BEGIN, ref_id=-1)
    tb.launch(step, x=x, y=y, line=10)
    zero = tb.event(S.TAPE_ZERO)
    tb.memset(tb.grad(y), line=11)
    tb.rows["events"]["parent"][-1] = zero
    tb.event(S.CAPTURE_END, ref_id=7)
    for i in range(3):
        tb.event(S.CAPTURE_LAUNCH, ref_id=7)
        tb.launch(step, x=y, y=x, line=20 + i)
    return tb


def test_expand_captures_parents_point_at_their_replay(tmp_path):
    tb = _capture_trace(tmp_path)
    for i, kind in enumerate(tb.rows["events"]["kind"]):
        if kind in (S.LAUNCH, S.MEMSET, S.TAPE_ZERO) and i < 5:
            tb.rows["events"]["executed"][i] = False  # captured, not run
    trace = expand_captures(read_trace(tb.write(tmp_path / "capture.wtrace")))
    events = trace.tables["events"].to_pydict()
    zeros = [i for i, kind in enumerate(events["kind"]) if kind == S.TAPE_ZERO]
    memsets = [i for i, kind in enumerate(events["kind"]) if kind == S.MEMSET]
    assert len(zeros) == len(memsets) == 3
    assert [events["parent"][m] for m in memsets] == [events["seq"][z] for z in zeros]
    assert all(events["executed"][m] for m in memsets)
    assert events["seq"] == list(range(len(events["seq"])))
