"""The CLI: ``analyze`` and ``show`` on a hand-made trace, unreadable traces, and the run path.

A user's mistake (a wrong path, a corrupt or foreign trace, a bad option) must cost one
``warptrace: error: ...`` line and exit status 2, never a traceback. The run path is
tested in-process against a fake recorder with the real recorder's API, so it checks
the CLI's contract (start before, stop after whatever ends the program, summary, notes)
independently of recording.
"""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from warptrace.cli import main
from warptrace.report import counts
from warptrace.trace.reader import read_trace
from warptrace.trace.schema import (
    ARRAY_GRAD,
    ARRAY_OWNED,
    ARRAY_VIEW,
    BACKWARD,
    BACKWARD_BEGIN,
    BACKWARD_END,
    FLAG_ACCUMULATE,
    FORWARD,
    LAUNCH,
    MEMSET,
    ROLE_READ,
    ROLE_WRITE,
    SCHEMAS,
    TAPE_CREATE,
    TAPE_ENTER,
    TAPE_EXIT,
    TAPE_ZERO,
)
from warptrace.trace.writer import TraceWriter

REPO = Path(__file__).resolve().parent.parent
PROBE = Path(__file__).resolve().parent / "probe_env.py"

HAS_ANALYZER = all(
    importlib.util.find_spec(name) is not None
    for name in ("warptrace.analysis.report", "warptrace.report.text", "warptrace.report.json")
)
needs_analyzer = pytest.mark.skipif(not HAS_ANALYZER, reason="analyzer or renderers not written yet")

# Column defaults for hand-written rows: ids -1, flags 0, strings "", lists empty.
_DEFAULTS: dict[str, Any] = {
    "tape": -1,
    "recorded": False,
    "phase": FORWARD,
    "adjoint": False,
    "executed": True,
    "site": -1,
    "kernel": -1,
    "thread": 0,
    "t_ns": 0,
    "parent": -1,
    "array_id": -1,
    "ref_id": -1,
    "value": None,
    "dim": None,
    "detail": None,
    "flags": 0,
    "arg": "",
    "field": "",
    "offset": 0,
    "shape": [],
    "strides": [],
    "itemsize": 4,
    "dtype": "float32",
    "device": "cpu",
    "requires_grad": False,
    "retain_grad": False,
    "grad_of": -1,
    "base_id": -1,
    "seq": -1,
    "label": "",
    "module": "__main__",
    "file": "",
    "line": -1,
    "source": "",
    "enable_backward": True,
    "custom_grad": "[]",
    "custom_replay": "[]",
    "native_snippets": False,
    "analysis": "ast",
    "text": "",
    "function": "<module>",
    "ptr": 0,
    "nbytes": 0,
}


def write_rows(writer: TraceWriter, table: str, rows: list[dict[str, Any]]) -> None:
    names = SCHEMAS[table].names
    full = [{**{name: _DEFAULTS.get(name) for name in names}, **row} for row in rows]
    writer.write(table, {name: [row[name] for row in full] for name in names})


def write_hand_trace(path: Path, cwd: Path, *, launches: int = 2, close: bool = True) -> Path:
    """One tape with ``launches`` forward launches (square, total, square, ...), a backward,
    a tape.zero(), one untaped launch; arrays x, its view x_head, y, loss, x.grad, an unlabeled one."""
    train = str(cwd / "train.py")
    writer = TraceWriter(
        path, {"argv": ["train.py", "--lr", "0.1"], "cwd": str(cwd), "warp_version": "1.19.0"}
    )
    sites = [
        (10, "x = wp.array(...)", "x"),
        (11, "y = wp.zeros(...)", "y"),
        (12, "loss = wp.zeros(...)", "loss"),
        (13, "x_head = x[:4]", "x_head"),
        (14, "tape = wp.Tape()", "tape"),
        (16, "wp.launch(square, ...)", ""),
        (17, "wp.launch(total, ...)", ""),
        (19, "tape.backward(loss)", ""),
        (20, "tape.zero()", ""),
        (22, "wp.launch(square, ...)", ""),
    ]
    write_rows(
        writer,
        "sites",
        [
            {"site_id": i, "file": train, "line": line, "text": text, "label": label}
            for i, (line, text, label) in enumerate(sites)
        ],
    )
    write_rows(
        writer,
        "kernels",
        [
            {"kernel_id": 0, "key": "square", "file": train, "line": 3},
            {"kernel_id": 1, "key": "total", "file": train, "line": 7},
        ],
    )
    write_rows(
        writer,
        "allocs",
        [{"alloc_id": a, "ptr": 4096 * (a + 1), "nbytes": 256, "kind": "owned", "site": a} for a in range(5)],
    )
    write_rows(
        writer,
        "arrays",
        [
            {"array_id": 0, "alloc_id": 0, "shape": [64], "strides": [4], "kind": ARRAY_OWNED, "requires_grad": True, "site": 0, "label": "x"},
            {"array_id": 1, "alloc_id": 1, "shape": [64], "strides": [4], "kind": ARRAY_OWNED, "requires_grad": True, "site": 1, "label": "y"},
            {"array_id": 2, "alloc_id": 2, "shape": [1], "strides": [4], "kind": ARRAY_OWNED, "requires_grad": True, "retain_grad": True, "site": 2, "label": "loss"},
            {"array_id": 3, "alloc_id": 3, "shape": [64], "strides": [4], "kind": ARRAY_GRAD, "grad_of": 0, "site": 0},
            {"array_id": 4, "alloc_id": 0, "shape": [4], "strides": [4], "kind": ARRAY_VIEW, "base_id": 0, "site": 3, "label": "x_head"},
            {"array_id": 5, "alloc_id": 4, "shape": [64], "strides": [4], "kind": ARRAY_OWNED, "site": 9},
        ],
    )  # fmt: skip
    events: list[dict[str, Any]] = []
    accesses: list[dict[str, Any]] = []

    def event(kind: str, **row: Any) -> int:
        seq = len(events)
        events.append({"seq": seq, "kind": kind, **row})
        return seq

    def access(seq: int, array_id: int, role: int, arg: str, flags: int = 0) -> None:
        alloc = {0: 0, 1: 1, 2: 2, 3: 3, 4: 0, 5: 4}[array_id]
        accesses.append(
            {"seq": seq, "array_id": array_id, "alloc_id": alloc, "role": role, "arg": arg, "flags": flags}
        )

    event(TAPE_CREATE, tape=0, site=4)
    event(TAPE_ENTER, tape=0, site=4)
    for i in range(launches):
        if i % 2 == 0:
            seq = event(LAUNCH, tape=0, recorded=True, site=5, kernel=0, dim="64")
            access(seq, 0, ROLE_READ, "x")
            access(seq, 1, ROLE_WRITE, "y")
        else:
            seq = event(LAUNCH, tape=0, recorded=True, site=6, kernel=1, dim="64")
            access(seq, 1, ROLE_READ, "y")
            access(seq, 2, ROLE_WRITE, "loss", FLAG_ACCUMULATE)
    event(TAPE_EXIT, tape=0, site=4)
    event(BACKWARD_BEGIN, tape=0, phase=BACKWARD, site=7, array_id=2)
    event(MEMSET, tape=0, phase=BACKWARD, site=7, value=1.0)
    event(LAUNCH, tape=0, phase=BACKWARD, adjoint=True, site=7, kernel=1)
    event(LAUNCH, tape=0, phase=BACKWARD, adjoint=True, site=7, kernel=0)
    event(BACKWARD_END, tape=0, phase=BACKWARD, site=7)
    event(TAPE_ZERO, tape=0, site=8)
    seq = event(LAUNCH, site=9, kernel=0, dim="64")
    access(seq, 0, ROLE_READ, "x")
    access(seq, 5, ROLE_WRITE, "tmp")
    write_rows(writer, "accesses", accesses)
    write_rows(writer, "events", events)
    if close:
        writer.close(exit_status=0)
    return path


@pytest.fixture
def hand_trace(tmp_path: Path) -> Path:
    return write_hand_trace(tmp_path / "run.wtrace", tmp_path)


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("warptrace: error: ")
    assert "Traceback" not in captured.err and captured.out == ""
    return lines[0]


# ------------------------------------------------------------------------- show


def test_show_summarizes_tapes_launches_and_arrays(hand_trace, capsys):
    assert main(["show", str(hand_trace)]) == 0
    out = capsys.readouterr().out
    assert "command   train.py --lr 0.1" in out
    assert "status    complete, exit status 0" in out
    assert "warp 1.19.0" in out
    assert (
        "1 tape, 2 recorded launches, 1 untaped launch, 0 copies, 1 memset, 1 backward call, 6 arrays" in out
    )
    assert "tape 0 (created at train.py:14): 2 recorded launches, 1 backward call" in out
    lines = out.splitlines()
    square = next(line for line in lines if "launch square" in line)
    assert "train.py:16" in square and "reads x -> writes y" in square
    total = next(line for line in lines if "launch total" in line)
    assert "reads y -> writes loss (+=)" in total
    backward = next(line for line in lines if "backward(loss=loss)" in line)
    assert "train.py:19" in backward and "2 adjoint launches, 1 memset" in backward
    assert any("tape.zero()" in line and "train.py:20" in line for line in lines)
    assert "outside any tape: 1 event (" in out
    assert "reads x -> writes tmp#5" in out  # unlabeled array: "<arg name>#<array_id>"
    arrays = lines[lines.index("arrays: 6") + 2 :]
    by_label = {line.split()[0]: line for line in arrays}
    assert "x_head" in by_label["x"] and by_label["x"].split()[-1] == "x_head"
    assert by_label["x_head"].split()[-1] == "x"  # aliases: same allocation, other objects
    assert "x.grad" in by_label  # a grad without label is named after its owner
    assert "(64,)" in by_label["y"] and "float32" in by_label["y"] and "train.py:11" in by_label["y"]
    assert by_label["loss"].split()[5:7] == ["yes", "yes"]  # requires_grad, retain_grad


def test_show_gives_the_gradient_flags_at_the_end_of_the_run(tmp_path, capsys):
    # wp.array(data, requires_grad=True) is registered by the copy of its data, before Warp
    # sets the flag; a flag set later is an event: the arrays table shows the final value
    wp = pytest.importorskip("warp")
    np = pytest.importorskip("numpy")
    import warptrace

    path = tmp_path / "flags.wtrace"
    warptrace.start(path)
    try:
        made = wp.array(np.ones(4, dtype=np.float32), requires_grad=True, device="cpu")
        later = wp.zeros(4, dtype=float, device="cpu")
        later.requires_grad = True
        dropped = wp.zeros(4, dtype=float, requires_grad=True, device="cpu")
        dropped.requires_grad = False
        for array in (made, later, dropped):
            array.zero_()  # registered: listed by show
    finally:
        warptrace.stop()
    assert main(["show", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    arrays = lines[next(i for i, line in enumerate(lines) if line.startswith("arrays: ")) + 2 :]
    by_label = {line.split()[0]: line.split() for line in arrays}
    assert by_label["made"][5] == "yes" and by_label["later"][5] == "yes" and by_label["dropped"][5] == "no"


def test_show_folds_long_tapes(tmp_path, capsys):
    trace = write_hand_trace(tmp_path / "long.wtrace", tmp_path, launches=30)
    assert main(["show", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "... 12 more events (show everything with --all)" in out  # 20 of 32 tape lines shown
    assert main(["show", "--all", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "more events" not in out
    assert out.count("launch square") == 16 and out.count("launch total") == 15


def test_show_incomplete_trace(tmp_path, capsys):
    trace = write_hand_trace(tmp_path / "killed.wtrace", tmp_path, close=False)
    assert main(["show", str(trace)]) == 0
    assert "incomplete: readable up to the last flush" in capsys.readouterr().out


def test_show_trace_without_warp_activity(tmp_path, capsys):
    TraceWriter(tmp_path / "empty.wtrace", {"argv": ["hello.py"]}).close(exit_status=0)
    assert main(["show", str(tmp_path / "empty.wtrace")]) == 0
    out = capsys.readouterr().out
    assert "activity  none" in out and "No Warp activity was recorded" in out


def test_show_needs_no_warp(hand_trace):
    code = (
        "import sys; sys.modules['warp'] = None; from warptrace.cli import main; "
        f"sys.exit(main(['show', {str(hand_trace)!r}]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "launch square" in result.stdout


# ---------------------------------------------------------------------- analyze


@needs_analyzer
@pytest.mark.parametrize("fail_on", ["error", "warning", "info"])
def test_analyze_text_and_exit_status(hand_trace, fail_on, capsys):
    from warptrace.analysis.findings import Severity
    from warptrace.analysis.report import analyze_trace

    report = analyze_trace(read_trace(hand_trace))
    assert main(["analyze", str(hand_trace), "--fail-on", fail_on]) == report.exit_code(
        Severity.parse(fail_on)
    )
    captured = capsys.readouterr()
    assert captured.out.strip()
    assert "Traceback" not in captured.err


@needs_analyzer
def test_analyze_json(hand_trace, capsys):
    status = main(["analyze", str(hand_trace), "--format", "json"])
    assert status in (0, 1)
    json.loads(capsys.readouterr().out)


@needs_analyzer
def test_analyze_says_when_nothing_was_recorded(tmp_path, capsys):
    TraceWriter(tmp_path / "empty.wtrace", {"argv": ["hello.py"]}).close(exit_status=0)
    assert main(["analyze", str(tmp_path / "empty.wtrace")]) == 0
    assert "holds no Warp activity" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["analyze", "{trace}", "--fail-on", "fatal"], "analyze: argument --fail-on: invalid choice"),
        (["analyze", "{trace}", "--format", "xml"], "analyze: argument --format: invalid choice"),
        (["analyze"], "analyze: the following arguments are required: TRACE"),
        (["show", "{trace}", "--bogus"], "show: unrecognized arguments: --bogus"),
        (["diff", "{trace}"], "diff: the following arguments are required: AFTER"),
    ],
)
def test_usage_errors_are_one_line(hand_trace, argv, message, capsys):
    assert main([word.format(trace=hand_trace) for word in argv]) == 2
    assert message in _one_error_line(capsys)


# ------------------------------------------------------------- unreadable traces


def _break_missing_dir(trace: Path) -> Path:
    shutil.rmtree(trace)
    return trace


def _break_meta(trace: Path) -> Path:
    (trace / "meta.json").write_text("{ this is not json")
    return trace


def _break_version(trace: Path) -> Path:
    meta = json.loads((trace / "meta.json").read_text())
    meta["schema_version"] = 999
    (trace / "meta.json").write_text(json.dumps(meta))
    return trace


def _break_table(trace: Path) -> Path:
    shutil.rmtree(trace / "kernels")
    return trace


def _break_part(trace: Path) -> Path:
    part = trace / "events" / "part-00000.parquet"
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    return trace


def _break_file(trace: Path) -> Path:
    shutil.rmtree(trace)
    trace.write_text("not a directory")
    return trace


BREAKAGES = {
    "missing-dir": (_break_missing_dir, "no such trace"),
    "meta-garbage": (_break_meta, "meta.json: unreadable"),
    "unknown-version": (_break_version, "schema version 999 is not supported"),
    "missing-table": (_break_table, "table 'kernels' is missing"),
    "truncated-part": (_break_part, "corrupt trace part"),
    "a-file": (_break_file, "a trace is a directory"),
}


@pytest.mark.parametrize("command", ["analyze", "show"])
@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_unreadable_trace_is_one_line_and_exit_2(hand_trace, command, breakage, capsys):
    breaker, message = BREAKAGES[breakage]
    broken = breaker(hand_trace)
    assert main([command, str(broken)]) == 2
    assert message in _one_error_line(capsys)


def test_unreadable_trace_from_the_command_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "warptrace", "analyze", str(tmp_path / "nope.wtrace")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr == f"warptrace: error: {tmp_path / 'nope.wtrace'}: no such trace\n"


# ------------------------------------------------------ the run path (fake recorder)


class FakeRecorder(types.ModuleType):
    """The recorder's module API (start/stop/last_summary), writing a real, empty trace."""

    def __init__(self, summary: dict[str, Any] | None = None) -> None:
        super().__init__("warptrace.record.recorder")
        self.summary = summary
        self.calls: list[tuple[str, Any]] = []
        self.writer: TraceWriter | None = None
        self.last_summary: dict[str, Any] | None = None

    def start(self, path: Any, **meta: Any) -> None:
        self.calls.append(("start", meta))
        self.writer = TraceWriter(path, meta)

    def stop(self, exit_status: int | None = None, error: str | None = None) -> str | None:
        self.calls.append(("stop", (exit_status, error)))
        assert self.writer is not None
        self.writer.close(exit_status=exit_status, error=error)
        self.last_summary = self.summary
        return str(self.writer.path)


@pytest.fixture
def recorder(monkeypatch, tmp_path) -> FakeRecorder:
    import warptrace.record

    fake = FakeRecorder()
    # Both: `from warptrace.record import recorder` prefers the package attribute when the
    # real recorder was imported earlier in the session.
    monkeypatch.setitem(sys.modules, "warptrace.record.recorder", fake)
    monkeypatch.setattr(warptrace.record, "recorder", fake, raising=False)
    monkeypatch.chdir(tmp_path)
    shutil.copy(PROBE, tmp_path / "probe_env.py")
    return fake


@pytest.mark.parametrize(
    "ending, status, error",
    [
        ([], 0, None),
        (["--raise", "boom"], 1, "ValueError: boom"),
        (["--exit", "3"], 3, None),
        (["--exit-msg", "bye"], 1, None),
        (["--interrupt"], 130, "KeyboardInterrupt"),
    ],
    ids=["normal", "exception", "exit", "exit-msg", "interrupt"],
)
def test_trace_is_complete_however_the_program_ends(recorder, ending, status, error, capsys):
    assert main(["-q", "--no-analyze", "probe_env.py", *ending]) == status
    assert [call[0] for call in recorder.calls] == ["start", "stop"]
    assert recorder.calls[0][1] == {"argv": ["probe_env.py", *ending], "script": "probe_env.py"}
    assert recorder.calls[1][1] == (status, error)
    meta = read_trace("probe_env.wtrace").meta
    assert meta["complete"] is True and meta["exit_status"] == status
    captured = capsys.readouterr()
    assert json.loads(captured.out)["argv"] == ["probe_env.py", *ending]
    assert "warptrace:" not in captured.err  # -q: nothing of ours


def test_summary_says_when_nothing_was_recorded(recorder, capsys):
    recorder.summary = dict.fromkeys((key for key, _, _ in counts.COUNT_NOUNS), 0)
    assert main(["-o", "out.wtrace", "probe_env.py"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "warptrace: no Warp activity was recorded (no launches, copies, memsets, tapes or arrays); trace written to out.wtrace"
    ]


def test_summary_lines(recorder, capsys):
    recorder.summary = {
        "tapes": 1, "recorded_launches": 40, "untaped_launches": 2, "copies": 3,
        "memsets": 1, "backward_calls": 1, "arrays": 7, "trace": "probe_env.wtrace",
    }  # fmt: skip
    assert main(["--no-analyze", "probe_env.py"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "warptrace: 1 tape, 40 recorded launches, 2 untaped launches, 3 copies, 1 memset, 1 backward call, 7 arrays",
        "warptrace: trace written to probe_env.wtrace",
    ]


def test_summary_counts_from_disk_when_the_recorder_gives_none(recorder, capsys):
    assert main(["--no-analyze", "probe_env.py"]) == 0
    assert "no Warp activity was recorded" in capsys.readouterr().err


def test_failing_analyzer_is_one_note(recorder, monkeypatch, capsys):
    recorder.summary = {key: 1 for key, _, _ in counts.COUNT_NOUNS}
    broken = types.ModuleType("warptrace.analysis.report")

    def analyze_trace(trace: Any, progress: Any = None) -> Any:
        raise RuntimeError("rule exploded")

    broken.analyze_trace = analyze_trace  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "warptrace.analysis.report", broken)
    assert main(["-q", "probe_env.py", "--exit", "4"]) == 4  # the program's status, not the analyzer's
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "warptrace: analysis failed (RuntimeError: rule exploded); the trace is intact: "
        "run 'python -m warptrace analyze probe_env.wtrace' later"
    ]


def test_missing_submodule_stops_the_recorder_and_exits_2(recorder, tmp_path, capsys):
    (tmp_path / "probepkg").mkdir()
    (tmp_path / "probepkg" / "__init__.py").write_text("")
    try:
        assert main(["-m", "probepkg.nope"]) == 2
    finally:
        sys.modules.pop("probepkg", None)
    assert _one_error_line(capsys) == "warptrace: error: No module named probepkg.nope"
    assert recorder.calls[-1] == ("stop", (2, "No module named probepkg.nope"))
    assert read_trace("nope.wtrace").meta["complete"] is True


def test_refuses_to_overwrite_a_folder_that_is_not_a_trace(recorder, tmp_path, capsys):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "keep.py").write_text("")
    assert main(["-o", "src", "probe_env.py"]) == 2
    assert "not a warptrace trace" in _one_error_line(capsys)
    assert recorder.calls == [] and (tmp_path / "src" / "keep.py").exists()


def test_run_default_output_for_a_module(recorder, tmp_path, capsys):
    (tmp_path / "probepkg").mkdir()
    (tmp_path / "probepkg" / "__init__.py").write_text("")
    shutil.copy(PROBE, tmp_path / "probepkg" / "probe_env.py")
    try:
        assert main(["-q", "--no-analyze", "-m", "probepkg.probe_env", "--help"]) == 0
    finally:
        sys.modules.pop("probepkg", None)
        sys.modules.pop("probepkg.probe_env", None)
    assert json.loads(capsys.readouterr().out)["argv"][1:] == ["--help"]
    assert recorder.calls[0][1]["argv"] == ["-m", "probepkg.probe_env", "--help"]
    assert (tmp_path / "probe_env.wtrace" / "meta.json").is_file()


def test_internal_error_has_a_traceback(recorder, monkeypatch, capsys):
    def broken_start(path: Any, **meta: Any) -> None:
        raise KeyError("oops")

    monkeypatch.setattr(recorder, "start", broken_start)
    assert main(["probe_env.py"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("warptrace: internal error: KeyError: 'oops'")
    assert "Traceback" in err


def test_reader_gone_is_not_a_traceback(hand_trace, monkeypatch, capsys):
    class ClosedPipe(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", ClosedPipe())  # fileno() is unsupported: fd 1 is left alone
    assert main(["show", str(hand_trace)]) == 1
    assert "Traceback" not in capsys.readouterr().err


def test_program_that_changes_directory_still_gets_its_trace(recorder, tmp_path, capsys):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "wander.py").write_text("import os\nos.chdir('elsewhere')\n")
    assert main(["wander.py"]) == 0  # the summary reads the trace back after the chdir
    assert capsys.readouterr().err.splitlines() == [
        "warptrace: no Warp activity was recorded (no launches, copies, memsets, tapes or arrays); trace written to wander.wtrace"
    ]
    assert read_trace(tmp_path / "wander.wtrace").complete


def test_unwritable_output_is_one_line(recorder, tmp_path, capsys):
    (tmp_path / "locked").write_text("")
    assert main(["-o", "locked/run.wtrace", "probe_env.py"]) == 2  # a file where a folder must go
    assert "cannot write the trace locked/run.wtrace" in _one_error_line(capsys)


@needs_analyzer
def test_analyze_needs_no_warp(hand_trace):
    code = (
        "import sys; sys.modules['warp'] = None; from warptrace.cli import main; "
        f"sys.exit(main(['analyze', {str(hand_trace)!r}, '--format', 'json']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode in (0, 1), result.stderr
    json.loads(result.stdout)


def test_help_is_generated_from_the_commands(capsys):
    from warptrace.analysis.findings import Severity
    from warptrace.commands import COMMANDS
    from warptrace.report import FORMATS

    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in COMMANDS:
        assert f"python -m warptrace {command.name} " in out and command.help in out
    assert "not implemented" not in out
    assert main(["analyze", "--help"]) == 0
    out = capsys.readouterr().out
    assert "{" + ",".join(FORMATS) + "}" in out
    assert "{" + ",".join(s.label for s in sorted(Severity, reverse=True)) + "}" in out


def test_usage_errors_import_nothing_heavy():
    code = (
        "import sys; from warptrace.cli import main; status = main(['--bogus', 'x.py']); "
        "heavy = sorted(m for m in ('warp', 'numpy', 'pyarrow') if m in sys.modules); "
        "print(status, heavy)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "2 []", result.stdout + result.stderr


_NESTED_BACKWARD = """
import warp as wp

wp.config.quiet = True


@wp.kernel
def scale(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * 2.0


@wp.kernel
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, x[wp.tid()])


a = wp.ones(4, dtype=float, requires_grad=True, device="cpu")
b = wp.zeros(4, dtype=float, requires_grad=True, device="cpu")
loss = wp.zeros(1, dtype=float, requires_grad=True, device="cpu")
inner = wp.Tape()
with inner:
    wp.launch(total, 4, [b], [loss], device="cpu")
outer = wp.Tape()
with outer:
    wp.launch(scale, 4, [a], [b], device="cpu")
    outer.record_func(backward=lambda: inner.backward(loss), arrays=[b, loss])
outer.backward(loss)
"""


def test_show_counts_a_nested_backward_apart(tmp_path, capsys):
    # a record_func whose backward runs another tape's backward: the inner backward line counts
    # its own seed and adjoint launch, the outer one its own, also the launch after the inner one
    pytest.importorskip("warp")
    script = tmp_path / "nested.py"
    script.write_text(_NESTED_BACKWARD)
    trace = tmp_path / "nested.wtrace"
    done = subprocess.run(
        [sys.executable, "-m", "warptrace", "-q", "--no-analyze", "-o", str(trace), str(script)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert main(["show", str(trace)]) == 0
    backward_lines = [line for line in capsys.readouterr().out.splitlines() if "backward(loss=loss)" in line]
    assert len(backward_lines) == 2
    assert all(line.endswith("1 adjoint launch, 1 memset") for line in backward_lines), backward_lines
