"""Recording schedules (``--record-steps``, ``--record-last``): what a scheduled recording holds,
and that its findings are those of a full recording restricted to the same steps.

The zoo test records each multi-step program twice, whole (the zoo trace every findings test
reads) and with a schedule that leaves a step out (``0,2-``, or ``1`` for two steps), then
compares, on buggy programs and their fixed twins:

- the findings of the scheduled recording with those of the full recording analyzed with
  ``--steps`` (the recorder's gating against an offline cut of the same steps: same events,
  same arrays, same findings, messages included);
- its errors and warnings with the full recording's: a window edge must not invent a hazard
  (a rule whose evidence sits in a step that was not recorded says "not recorded", as info).
"""

from __future__ import annotations

import json
import os

import pytest

from tests.zoo import Program, discover, load, recorder_available
from warptrace.analysis.findings import Finding, Severity
from warptrace.cli import main
from warptrace.errors import UsageError
from warptrace.trace.schedule import describe, parse_last, parse_steps

# multi-step programs of the families that compare steps, each with its fixed twin, and the
# look-alikes whose evidence sits in an earlier step
_NAMES = (
    "wt101_pingpong_diverges", "wt103_other_tape", "wt103_capture_epoch_reload", "wt104_struct_diverges",
    "wt203_train_loop", "wt203_clip_in_place", "wt204_tape_kept", "wt302_frames", "wt303_checkpoint",
    "wt304_mean_after_update", "wt306_delayed", "wt310_copy_not_view", "wt401_class_rebuilt",
    "wt501_log_overshoot", "wt504_jacobi_reused",
)  # fmt: skip
_LOOKALIKES = (
    "ok_acc_two_stage",
    "ok_mem_tree_gather_scatter",
    "ok_num_store_then_read",
    "ok_flow_microbatch",
)
_WANTED = {*_NAMES, *(name + "_fixed" for name in _NAMES), *_LOOKALIKES}
PROGRAMS = [p for p in discover() if p.name in _WANTED]


def test_the_zoo_programs_are_there():
    assert len(PROGRAMS) == len(_WANTED), sorted(_WANTED - {p.name for p in PROGRAMS})


# ---------------------------------------------------------------------------- schedules


def test_parse_steps():
    ranges = parse_steps("100-104, 0-4,3-6,7")
    assert ranges.ranges == ((0, 7), (100, 104))
    assert [s for s in range(110) if ranges.wants(s)] == [*range(8), *range(100, 105)]
    open_ended = parse_steps("5,10-")
    assert open_ended.ranges == ((5, 5), (10, None))
    assert open_ended.wants(10**6) and not open_ended.wants(6)
    assert parse_steps("0-3,2-").ranges == ((0, None),)
    assert parse_last("3") == 3


@pytest.mark.parametrize("spec", ["", "a", "4-2", "-1", "1-2-3", "1,,2"])
def test_parse_steps_refuses(spec):
    with pytest.raises(UsageError, match="--record-steps"):
        parse_steps(spec)


@pytest.mark.parametrize("value", ["0", "-2", "x"])
def test_parse_last_refuses(value):
    with pytest.raises(UsageError, match="--record-last"):
        parse_last(value)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--record-steps", "x", "prog.py"], "--record-steps"),
        (["--record-last", "0", "prog.py"], "--record-last"),
        (["--record-steps", "1", "--record-last", "2", "prog.py"], "cannot be combined"),
    ],
)
def test_bad_schedules_are_usage_errors(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prog.py").write_text("print('ran')\n")
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "ran" not in captured.out
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]


def test_describe():
    meta = {
        "recording": {
            "mode": "steps", "spec": "0-1,5", "unit": "backward", "steps": 8,
            "windows": [{"first_step": 0, "last_step": 1, "first_seq": 0, "end_seq": 9},
                        {"first_step": 5, "last_step": 5, "first_seq": 11, "end_seq": 20}],
        }
    }  # fmt: skip
    text = describe(meta)
    assert text is not None and text.startswith("recorded steps 0-1, 5 of 8 (--record-steps 0-1,5")
    assert "not recorded" in text
    assert describe({}) is None


# ---------------------------------------------------------------------------- recordings


def _record(program: Program, path, **schedule) -> None:
    import warptrace

    module = load(program, module_name="zoo_sched_" + program.name.replace("/", "_"))
    warptrace.start(path, numerics=program.numerics, **schedule)
    try:
        module.run()
    finally:
        warptrace.stop()


def _program(name: str) -> Program:
    return next(p for p in PROGRAMS if p.name == name)


def _key(finding: Finding) -> tuple[str, str, str, int, str]:
    loc = finding.location
    return (finding.code, finding.severity.label, os.path.realpath(loc.file), loc.line, finding.message)


def _needs_recorder(program: Program) -> None:
    missing = recorder_available() or program.skip_reason()
    if missing:
        pytest.skip(missing)


def test_scheduled_trace_holds_the_steps(zoo_traces, tmp_path):
    """wt203_train_loop: 4 iterations, one backward each; steps 1 and 3 recorded."""
    program = _program("wt203_train_loop")
    _needs_recorder(program)
    import warptrace
    from warptrace.report.text import render
    from warptrace.trace.reader import read_trace

    path = tmp_path / "sched.wtrace"
    _record(program, path, record_steps="1,3")
    trace = read_trace(path)
    recording = trace.meta["recording"]
    assert recording["mode"] == "steps" and recording["steps"] == 4
    assert [(w["first_step"], w["last_step"]) for w in recording["windows"]] == [(1, 1), (3, 3)]
    kinds = trace.tables["events"].column("kind").to_pylist()
    assert kinds.count("backward_begin") == 2
    seqs = trace.tables["events"].column("seq").to_pylist()
    windows = recording["windows"]
    inside = [any(w["first_seq"] <= s < w["end_seq"] for w in windows) for s in seqs]
    outside = {k for k, i in zip(kinds, inside) if not i}
    assert outside <= {"set_requires_grad", "set_retain_grad", "set_grad"}

    # the arrays of the recorded steps are the full recording's (labels, allocation sites)
    full = read_trace(zoo_traces(program))
    arrays = trace.tables["arrays"].to_pylist()
    full_arrays = {(a["label"], a["site"] >= 0, tuple(a["shape"])) for a in full.tables["arrays"].to_pylist()}
    assert arrays and all((a["label"], a["site"] >= 0, tuple(a["shape"])) in full_arrays for a in arrays)
    assert len(arrays) <= len(full.tables["arrays"])

    report = warptrace.analyze(path)
    assert "recorded steps 1, 3 of 4" in render(report)
    # the other commands read a trace of two windows too
    assert main(["show", str(path)]) == 0
    assert main(["export", str(path), "--perfetto", str(tmp_path / "t.json")]) == 0
    assert main(["analyze", str(path), "--format", "html", "-o", str(tmp_path / "r.html")]) in (0, 1)
    assert main(["analyze", str(zoo_traces(program)), "--steps", "1-x"]) == 2


def test_scheduled_trace_is_smaller(zoo_traces, tmp_path):
    """wt302_frames_diverge: 320 steps; recording 2 of them stores a fraction of the events."""
    program = next(p for p in discover() if p.name == "wt302_frames_diverge")
    _needs_recorder(program)
    from warptrace.trace.reader import read_trace

    path = tmp_path / "two.wtrace"
    _record(program, path, record_steps="10-11")
    events = read_trace(path).tables["events"].num_rows
    full_events = read_trace(zoo_traces(program)).tables["events"].num_rows
    assert events * 50 < full_events
    allocs = read_trace(path).tables["allocs"].num_rows
    assert allocs < read_trace(zoo_traces(program)).tables["allocs"].num_rows


def test_flight_recorder_keeps_the_last_steps(tmp_path):
    program = _program("wt203_train_loop")
    _needs_recorder(program)
    import warptrace
    from warptrace.trace.reader import read_trace

    path = tmp_path / "last.wtrace"
    _record(program, path, record_last=2)
    trace = read_trace(path)
    recording = trace.meta["recording"]
    assert recording["mode"] == "last" and recording["trigger"] == "end"
    assert [(w["first_step"], w["last_step"]) for w in recording["windows"]] == [(2, 3)]
    assert trace.tables["events"].column("kind").to_pylist().count("backward_begin") == 2
    assert any(f.code == "WT203" for f in warptrace.analyze(path).findings)


def test_flight_recorder_writes_at_the_first_nonfinite_value(tmp_path):
    """wt501_log_overshoot: gradient descent overshoots into the domain where a log is not finite
    after a few iterations; a flight recorder of one step holds the step of WT501's origin."""
    program = _program("wt501_log_overshoot")
    _needs_recorder(program)
    import warptrace
    from warptrace.trace.reader import read_trace

    full = tmp_path / "full.wtrace"
    _record(program, full)
    path = tmp_path / "nan.wtrace"
    _record(program, path, record_last=1)
    recording = read_trace(path).meta["recording"]
    assert recording["trigger"] == "nonfinite"
    steps = recording["steps"]
    window = recording["windows"][0]
    assert window["first_step"] == window["last_step"]
    assert window["last_step"] < steps - 1 or steps == 1
    origin = [f for f in warptrace.analyze(path).findings if f.code == "WT501"]
    full_origin = [f for f in warptrace.analyze(full).findings if f.code == "WT501"]
    assert origin and [_key(f)[:4] for f in origin] == [_key(f)[:4] for f in full_origin]


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_scheduled_findings_equal_restricted_full_findings(program: Program, zoo_traces, tmp_path):
    _needs_recorder(program)
    from warptrace.analysis.report import analyze_trace
    from warptrace.analysis.windows import step_windows
    from warptrace.trace.reader import read_trace

    full = read_trace(zoo_traces(program))
    _, steps = step_windows(full, parse_steps("0-"))
    spec = "0,2-" if steps >= 3 else "1" if steps == 2 else "0"  # (a fixed twin may have one step)
    path = tmp_path / "sched.wtrace"
    _record(program, path, record_steps=spec)
    scheduled = analyze_trace(read_trace(path)).findings
    restricted = analyze_trace(full, steps=parse_steps(spec)).findings
    assert sorted(map(_key, scheduled)) == sorted(map(_key, restricted))

    whole = {_key(f)[0:1] + _key(f)[2:4] for f in analyze_trace(full).findings}
    invented = [
        f for f in scheduled if f.severity >= Severity.WARNING and _key(f)[0:1] + _key(f)[2:4] not in whole
    ]
    assert not invented, json.dumps([f.message for f in invented], indent=1)
