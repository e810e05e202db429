"""Chrome trace-event JSON: tracks per tape, backward slices containing their adjoints, findings
as instants with a read -> overwrite flow."""

from __future__ import annotations

import io
import json

import pytest

from tests.recorded import record


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from warptrace.report import perfetto

    report, _ = record("wt101_force_reuse", tmp_path_factory.mktemp("perfetto"))
    out = io.StringIO()
    count = perfetto.write(report.model, report.findings, out)
    document = json.loads(out.getvalue())
    assert len(document["traceEvents"]) == count
    return report, document["traceEvents"]


def test_tracks_per_tape_and_untaped(exported):
    _, events = exported
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {1: "untaped", 2: "tape 0"}
    slices = [e for e in events if e["ph"] == "X"]
    forward = [e["name"] for e in slices if e["tid"] == 2 and e["cat"] == "launch"]
    assert forward == ["spring_force", "integrate"] * 4 + ["sum_squares"]
    copies = [e for e in slices if e["tid"] == 1]
    assert copies and {e["name"] for e in copies} <= {"copy", "memset"}
    launch = next(e for e in slices if e["name"] == "spring_force")
    assert launch["args"]["writes"] == ["force"] and launch["args"]["kernel"] == "spring_force"
    assert launch["args"]["site"].startswith("tests/programs/wt101_force_reuse.py:")


def test_backward_slice_contains_the_adjoints(exported):
    _, events = exported
    (backward,) = [e for e in events if e["ph"] == "X" and e["name"] == "tape.backward()"]
    adjoints = [e for e in events if e["ph"] == "X" and e["cat"] == "adjoint"]
    assert len(adjoints) == 9 and all(e["tid"] == backward["tid"] for e in adjoints)
    end = backward["ts"] + backward["dur"]
    assert all(backward["ts"] <= e["ts"] and e["ts"] + e["dur"] <= end + 1e-6 for e in adjoints)
    assert adjoints[0]["name"] == "adj_sum_squares"


def test_no_overlapping_slices_on_a_track(exported):
    _, events = exported
    for tid in (1, 2):
        spans = sorted(
            (e["ts"], e["ts"] + e["dur"])
            for e in events
            if e["ph"] == "X" and e["tid"] == tid and e["cat"] != "backward"
        )
        assert all(a_end <= b_start + 1e-6 for (_, a_end), (b_start, _) in zip(spans, spans[1:]))


def test_finding_instant_and_flows(exported):
    _, events = exported
    (instant,) = [e for e in events if e["ph"] == "i" and e["cat"] == "finding"]
    assert instant["name"] == "WT101 overwrite-after-read" and instant["args"]["severity"] == "error"
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    finishes = {e["id"]: e for e in events if e["ph"] == "f"}
    assert starts and starts.keys() == finishes.keys()
    slices = [e for e in events if e["ph"] == "X" and e["cat"] != "backward"]

    def slice_at(flow):  # the slice a flow event binds to: open on its track at its time
        (found,) = [
            e for e in slices if e["tid"] == flow["tid"] and e["ts"] < flow["ts"] < e["ts"] + e["dur"]
        ]
        return found

    for flow_id, start in starts.items():
        read, write = slice_at(start), slice_at(finishes[flow_id])
        assert (read["name"], write["name"]) == ("integrate", "spring_force")
        assert finishes[flow_id]["bp"] == "e"
