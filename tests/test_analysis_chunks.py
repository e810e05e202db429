"""A long trace analyzed window by window (``warptrace.analysis.chunks``) and the window
reader under it (``read_trace(path, seq_range=...)``): the same findings and counts as the
whole-trace analysis on a training loop, windows cut only between tape recordings."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from warptrace.analysis.chunks import analyze_windowed, cut_points, plan_windows
from warptrace.analysis.report import analyze_trace
from warptrace.trace import schema as S
from warptrace.trace.reader import read_trace

ROOT = Path(__file__).resolve().parents[1]


def _synth():
    spec = importlib.util.spec_from_file_location("synth_trace", ROOT / "tools" / "synth_trace.py")
    assert spec is not None and spec.loader is not None
    module = sys.modules.get("synth_trace")
    if module is None:
        module = importlib.util.module_from_spec(spec)
        sys.modules["synth_trace"] = module  # its dataclasses look their module up
        spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def training_loop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60 iterations of the synthetic training loop in parts of 1000 access rows."""
    path = tmp_path_factory.mktemp("windows") / "loop.wtrace"
    _synth().generate(path, 3000, substeps=4, part_rows=1000)
    return path


def _said(report) -> str:
    return json.dumps(
        {"findings": [f.to_dict() for f in report.findings], "counts": report.counts}, sort_keys=True
    )


def test_window_reads_the_rows_of_its_seqs(training_loop: Path):
    whole = read_trace(training_loop)
    seq = whole.tables["events"].column("seq").to_numpy()
    lo, hi = int(seq[len(seq) // 3]), int(seq[len(seq) // 2])
    window = read_trace(training_loop, seq_range=(lo, hi))
    assert window.seq_range == (lo, hi)
    for name in ("events", "accesses"):
        expected = whole.tables[name].column("seq").to_numpy()
        expected = expected[(expected >= lo) & (expected < hi)]
        assert np.array_equal(window.tables[name].column("seq").to_numpy(), expected)
    for name in ("arrays", "allocs", "kernels", "kernel_args", "sites"):
        assert window.tables[name].equals(whole.tables[name])
    empty = read_trace(training_loop, seq_range=(int(seq[-1]) + 1, int(seq[-1]) + 10))
    assert empty.tables["events"].num_rows == 0 and empty.tables["accesses"].num_rows == 0


def test_windowed_findings_equal_whole(training_loop: Path):
    plan = plan_windows(training_loop, 997)
    assert plan is not None and len(plan.windows) > 1
    whole = analyze_trace(read_trace(training_loop))
    assert whole.findings  # the reused scratch buffer: WT101 once per substep
    assert _said(analyze_windowed(training_loop, 997)) == _said(whole)


def test_one_iteration_per_window(training_loop: Path):
    """Windows of about one iteration: the same root causes, lines and counts; the evidence
    lists of a finding then hold the occurrences of its first window only."""

    def said(report) -> list[tuple]:
        return [
            (f.code, f.severity, str(f.location), f.count, f.evidence.get("first_seq"))
            for f in report.findings
        ]

    whole = analyze_trace(read_trace(training_loop))
    windowed = analyze_windowed(training_loop, 50)
    assert said(windowed) == said(whole)
    assert windowed.counts == whole.counts


def test_windowed_gradient_accumulation(tmp_path: Path):
    """Cuts fall between the backward calls that accumulate into one gradient: still the same."""
    path = tmp_path / "accumulate.wtrace"
    _synth().generate(path, 2000, substeps=4, part_rows=1000, accumulate=3)
    assert _said(analyze_windowed(path, 300)) == _said(analyze_trace(read_trace(path)))


def test_windows_tile_the_trace(training_loop: Path):
    plan = plan_windows(training_loop, 500)
    assert plan is not None
    events = read_trace(training_loop).tables["events"]
    seq = events.column("seq").to_numpy()
    assert plan.windows[0].start_seq == int(seq[0])
    for before, after in zip(plan.windows, plan.windows[1:]):
        assert before.stop_seq == after.start_seq
    assert plan.windows[-1].stop_seq > int(seq[-1])
    assert sum(w.events for w in plan.windows) == len(seq)
    assert plan.tapes == len(set(events.column("tape").to_pylist()) - {-1})


def _codes(*names: str) -> np.ndarray:
    return np.array([S.EVENT_KIND_CODES[n] for n in names], dtype=np.int16)


def test_cut_points_never_split_a_recording():
    # tape 0: events 0-2; untaped 3; tape 1: 4-5, reset at 6, then records again 7-8; untaped 9
    tape = np.array([0, 0, 0, -1, 1, 1, 1, 1, 1, -1])
    kind = _codes(*[S.LAUNCH] * 6, S.TAPE_RESET, S.LAUNCH, S.LAUNCH, S.LAUNCH)
    assert cut_points(tape, kind).tolist() == [0, 3, 4, 7, 9, 10]
    # interleaved tapes: no cut while either records
    tape = np.array([0, 1, 0, 1, -1])
    assert cut_points(tape, _codes(*[S.LAUNCH] * 5)).tolist() == [0, 4, 5]


def test_whole_where_windows_cannot_help(tmp_path: Path):
    """A trace that fits one window is analyzed whole: the ordinary report, model included."""
    path = tmp_path / "small.wtrace"
    _synth().generate(path, 500, substeps=4)
    report = analyze_windowed(path)
    assert report.model is not None
    assert _said(report) == _said(analyze_trace(read_trace(path)))


def test_cli_window(training_loop: Path, capsys: pytest.CaptureFixture[str]):
    from warptrace.cli import main

    assert main(["analyze", "--format", "json", str(training_loop)]) == 1
    whole = json.loads(capsys.readouterr().out)
    assert main(["analyze", "--format", "json", "--window", "997", str(training_loop)]) == 1
    windowed = json.loads(capsys.readouterr().out)
    assert windowed["findings"] == whole["findings"]
    assert main(["analyze", "--window", "0", str(training_loop)]) == 2
    assert "positive number of events" in capsys.readouterr().err
