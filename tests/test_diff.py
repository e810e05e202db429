"""``warptrace diff`` on synthetic traces (no Warp): folding, loops, buffers, tapes, numbers, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.tracebuilder import TraceBuilder
from warptrace.analysis.diff import diff_traces
from warptrace.analysis.diff.align import Loop, fold, normalize_text
from warptrace.cli import main
from warptrace.report.diff import render
from warptrace.trace.reader import read_trace


def _loop_program(
    steps: int = 200, *, distinct: bool = True, extra: bool = False, shift: int = 0
) -> TraceBuilder:
    """A time loop on one tape: 4 launches per step (5 with ``extra``), the state either one array
    per step or two arrays used in turn (ping-pong: WT101)."""
    tb = TraceBuilder()
    line = shift + 10
    w = tb.array("w", requires_grad=True, line=line)
    force = tb.kernel("force", x="r", w="r", f="w")
    integrate = tb.kernel("integrate", x="r", f="r", y="w")
    collide = tb.kernel("collide", y="r", c="w")
    energy = tb.kernel("energy", y="r", e="a")
    damp = tb.kernel("damp", y="r", d="w")
    total = tb.kernel("total", x="r", loss="a")
    count = steps + 1 if distinct else 2
    states = [tb.array("state", requires_grad=True, line=line + 1) for _ in range(count)]
    forces = [tb.array("f", requires_grad=True, line=line + 2) for _ in range(steps)]
    contacts = tb.array("c", line=line + 3)
    e = tb.array("e", shape=(1,), line=line + 4)
    d = tb.array("d", line=line + 5)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=line + 6)
    tape = tb.tape(line=line + 7)
    with tb.recording(tape, line=line + 8):
        for t in range(steps):
            x, y = states[t % count], states[(t + 1) % count]
            tb.launch(force, x=x, w=w, f=forces[t], line=line + 9)
            tb.launch(integrate, x=x, f=forces[t], y=y, line=line + 10)
            tb.launch(collide, y=y, c=contacts, line=line + 11)
            tb.launch(energy, y=y, e=e, line=line + 12)
            if extra:
                tb.launch(damp, y=y, d=d, line=line + 13)
        tb.launch(total, x=states[steps % count], loss=loss, line=line + 14)
    tb.backward(tape, loss, line=line + 15)
    return tb


def _diff(tmp_path: Path, before: TraceBuilder, after: TraceBuilder):
    return diff_traces(
        read_trace(before.write(tmp_path / "before.wtrace")),
        read_trace(after.write(tmp_path / "after.wtrace")),
    )


# ------------------------------------------------------------------ folding and alignment


def test_fold_nests_loops_innermost_first():
    assert fold(np.array([1, 2, 1, 2, 1, 2, 3])) == [Loop((1, 2), 3), 3]
    inner = Loop((1,), 2)
    assert fold(np.array([1, 1, 2] * 3)) == [Loop((inner, 2), 3)]
    assert fold(np.array([5, 6, 7])) == [5, 6, 7]
    assert fold(np.array([], dtype=np.int64)) == []


def test_normalize_text_drops_comments_and_spacing():
    assert normalize_text("wp.launch(k,  dim=n)  # expect: WT101") == "wp.launch(k, dim=n)"
    assert normalize_text('print("#not a comment")  # one') == 'print("#not a comment")'


def test_identical_runs_have_no_changes(tmp_path):
    diff = _diff(tmp_path, _loop_program(50), _loop_program(50, shift=3))
    assert diff.changes == [] and diff.resolved == [] and diff.introduced == []
    assert diff.related and diff.exit_code() == 0


def test_a_change_inside_a_loop_body_is_reported_once(tmp_path):
    diff = _diff(tmp_path, _loop_program(200), _loop_program(200, extra=True))
    added = [c for c in diff.changes if c.kind == "launch_added"]
    assert len(added) == 1
    assert added[0].times == 200
    assert "launch of `damp` added" in added[0].message and "(× 200)" in added[0].message
    assert [c.kind for c in diff.changes if c.kind not in ("launch_added", "allocations")] == []


def test_loop_count_change(tmp_path):
    diff = _diff(tmp_path, _loop_program(200), _loop_program(100))
    (loop,) = [c for c in diff.changes if c.kind == "repeat_count"]
    assert "loop body of 4 steps" in loop.message and "200 → 100 steps" in loop.message


def test_pingpong_state_becomes_distinct(tmp_path):
    diff = _diff(tmp_path, _loop_program(200, distinct=False), _loop_program(200))
    assert {f.code for f in diff.resolved} == {"WT101"}
    first = diff.changes[0]
    assert first.kind == "buffers_distinct"
    assert first.message.startswith("`state`: 2 buffers shared across 200 steps → 200 distinct")
    assert first.explains == ["WT101"]
    assert diff.exit_code() == 0
    assert (
        diff_traces(read_trace(tmp_path / "after.wtrace"), read_trace(tmp_path / "before.wtrace")).exit_code()
        == 1
    )


def _two_tapes(merged: bool) -> TraceBuilder:
    tb = TraceBuilder()
    x = tb.array("x", requires_grad=True, line=1)
    h = tb.array("h", requires_grad=True, line=2)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=3)
    f = tb.kernel("f", x="r", h="w")
    g = tb.kernel("g", h="r", loss="a")
    first = tb.tape(line=10)
    with tb.recording(first, line=11):
        tb.launch(f, x=x, h=h, line=12)
        if merged:
            tb.launch(g, h=h, loss=loss, line=15)
    if not merged:
        second = tb.tape(line=13)
        with tb.recording(second, line=14):
            tb.launch(g, h=h, loss=loss, line=15)
    tb.backward(first, loss, line=16)
    return tb


def test_tapes_merged(tmp_path):
    diff = _diff(tmp_path, _two_tapes(merged=False), _two_tapes(merged=True))
    kinds = {c.kind: c.message for c in diff.changes}
    assert kinds["tapes_merged"].startswith("tapes `tape` (train.py:10) and `tape` (train.py:13) merged into")
    assert kinds["moved_between_tapes"].startswith("launch of `g` moved from tape `tape` (train.py:13)")
    assert "tape_removed" not in kinds


def test_requires_grad_flip_and_gradient_path(tmp_path):
    def program(hidden_grad: bool) -> TraceBuilder:
        tb = TraceBuilder()
        x = tb.array("x", line=1)
        w1 = tb.array("w1", requires_grad=True, line=2)
        hidden = tb.array("hidden", requires_grad=hidden_grad, line=3)
        loss = tb.array("loss", shape=(1,), requires_grad=True, line=4)
        lift = tb.kernel("lift", x="r", w="r", h="w")
        readout = tb.kernel("readout", h="r", loss="a")
        tape = tb.tape(line=5)
        with tb.recording(tape, line=6):
            tb.launch(lift, x=x, w=w1, h=hidden, line=7)
            tb.launch(readout, h=hidden, loss=loss, line=8)
        tb.backward(tape, loss, line=9)
        return tb

    diff = _diff(tmp_path, program(False), program(True))
    messages = {c.kind: c.message for c in diff.changes}
    assert messages["requires_grad"] == "`hidden`: requires_grad False → True"
    assert messages["grad_path_gained"] == "gradient path `w1` → `loss` gained"


# ------------------------------------------------------------------ numbers


def test_numbers_compared_when_both_runs_carry_them(tmp_path):
    before, after = _loop_program(20), _loop_program(20)
    before.meta["numerics"] = {"loss": 0.5, "grads": {"w": {"norm": 2.0, "zero_fraction": 0.5}}}
    after.meta["numerics"] = {"loss": 0.25, "grads": {"w": {"norm": 1.0, "zero_fraction": 0.0}}}
    diff = _diff(tmp_path, before, after)
    assert [n.message for n in diff.numbers] == [
        "loss: 0.5 → 0.25",
        "grad norm of `w`: 2 → 1",
        "zero fraction of `w.grad`: 0.5 → 0",
    ]
    assert "numbers:" in render(diff)


def test_numbers_skipped_when_a_run_has_none(tmp_path):
    before = _loop_program(20)
    before.meta["numerics"] = {"loss": 0.5}
    diff = _diff(tmp_path, before, _loop_program(20))
    assert diff.numbers == [] and "numbers:" not in render(diff)


# ------------------------------------------------------------------ CLI


def test_cli_text_json_and_exit_status(tmp_path, capsys):
    _loop_program(30).write(tmp_path / "fixed.wtrace")
    _loop_program(30, distinct=False).write(tmp_path / "buggy.wtrace")
    assert main(["diff", str(tmp_path / "buggy.wtrace"), str(tmp_path / "fixed.wtrace")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].endswith(" resolved, 0 introduced, 0 unchanged")
    assert "resolved  error WT101" in out and "[explains WT101]" in out

    assert (
        main(["diff", str(tmp_path / "fixed.wtrace"), str(tmp_path / "buggy.wtrace"), "--format", "json"])
        == 1
    )
    data = json.loads(capsys.readouterr().out)
    assert {f["code"] for f in data["findings"]["introduced"]} == {"WT101"}
    assert data["exit_code"] == 1 and data["summary"]["new_errors"] >= 1
    assert all({"kind", "message"} <= set(change) for change in data["structure"])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["diff", "{trace}"], "diff: the following arguments are required: AFTER"),
        (["diff", "{trace}", "{missing}"], "missing.wtrace: no such trace"),
        (["diff", "{trace}", "{trace}", "--format", "html"], "diff: argument --format: invalid choice"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, argv, message, capsys):
    trace = _loop_program(5).write(tmp_path / "run.wtrace")
    words = [w.format(trace=trace, missing=tmp_path / "missing.wtrace") for w in argv]
    assert main(words) == 2
    captured = capsys.readouterr()
    assert len(captured.err.splitlines()) == 1 and message in captured.err
    assert "Traceback" not in captured.err


def test_diff_needs_no_warp(tmp_path):
    _loop_program(5).write(tmp_path / "a.wtrace")
    _loop_program(6).write(tmp_path / "b.wtrace")
    code = (
        "import sys; sys.modules['warp'] = None\n"
        "from warptrace.cli import main\n"
        f"sys.exit(main(['diff', {str(tmp_path / 'a.wtrace')!r}, {str(tmp_path / 'b.wtrace')!r}]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "steps" in result.stdout


def test_empty_and_incomplete_traces(tmp_path):
    empty = TraceBuilder().write(tmp_path / "empty.wtrace")
    loop = _loop_program(10).write(tmp_path / "loop.wtrace")
    partial = _loop_program(10).write(tmp_path / "partial.wtrace", complete=False)
    assert diff_traces(read_trace(empty), read_trace(empty)).changes == []
    grown = diff_traces(read_trace(empty), read_trace(loop))
    assert not grown.related and grown.changes and "changes:" in render(grown)
    assert diff_traces(read_trace(loop), read_trace(partial)).changes == []


def _irregular(seed: int, launches: int) -> TraceBuilder:
    """Launches of 6 kernels in a random order (nothing folds), on one tape."""
    rng = np.random.default_rng(seed)
    tb = TraceBuilder()
    x = tb.array("x", requires_grad=True, line=1)
    kernels = [tb.kernel(f"k{i}", x="r", y="w") for i in range(6)]
    ys = [tb.array(f"y{i}", requires_grad=True, line=2 + i) for i in range(6)]
    tape = tb.tape(line=10)
    with tb.recording(tape, line=11):
        for i in rng.integers(0, 6, size=launches).tolist():
            tb.launch(kernels[i], x=x, y=ys[i], line=20 + i)
    return tb


def test_long_irregular_runs_are_compared_by_counts(tmp_path):
    diff = _diff(tmp_path, _irregular(1, 25_000), _irregular(2, 25_000))
    kinds = {c.kind for c in diff.changes}
    assert kinds <= {"repeat_count"}, kinds
    assert diff.related


def _site(
    site_id: int, line: int, text: str, file: str = "/p/train.py", function: str = "run", label: str = ""
):
    from warptrace.analysis.diff.align import Site

    return Site(site_id=site_id, file=file, line=line, function=function, text=text, label=label)


def test_sites_match_by_text_then_kernels_then_similarity():
    from warptrace.analysis.diff.align import match_files, match_sites

    before = {
        0: _site(0, 10, "x = wp.zeros(n, dtype=float)", label="x"),
        1: _site(1, 11, "wp.launch(step, dim=n, inputs=[x], outputs=[y])  # expect: WT101"),
        2: _site(2, 12, "tape.backward(loss)"),
        3: _site(3, 13, "tape.backward(loss)"),
    }
    after = {  # renamed file, 3 lines inserted above, one allocation edited, a launch rewritten
        0: _site(
            0, 13, "x = wp.zeros(n, dtype=float, requires_grad=True)", file="/q/train_fixed.py", label="x"
        ),
        1: _site(1, 14, "wp.launch(step, dim=n, inputs=[xs[t]], outputs=[ys[t]])", file="/q/train_fixed.py"),
        2: _site(2, 15, "tape.backward(loss)", file="/q/train_fixed.py"),
        3: _site(3, 16, "tape.backward(loss)", file="/q/train_fixed.py"),
    }
    kernels = {1: frozenset({"step"})}
    files = match_files(before.values(), after.values(), {}, {})
    assert files == {"/q/train_fixed.py": "/p/train.py"}
    sites = match_sites(before, after, kernels, kernels, files)
    assert sites.canon_b == {0: 0, 1: 1, 2: 2, 3: 3}
    assert sites.line_shift("/p/train.py", 12) == 3


def test_files_with_little_in_common_are_not_paired():
    from warptrace.analysis.diff.align import match_files

    before = [_site(i, i, f"a{i} = f()") for i in range(10)] + [_site(10, 20, "tape = wp.Tape()")]
    after = [_site(i, i, f"b{i} = g()", file="/q/other.py") for i in range(10)]
    after.append(_site(10, 20, "tape = wp.Tape()", file="/q/other.py"))
    after.append(_site(11, 5, "def helper():", file="/q/helpers.py"))
    assert match_files(before, after, {}, {}) == {}
    # one script on each side (saved under a new name) pairs on any common line
    assert match_files(before, after[:-1], {}, {}) == {"/q/other.py": "/p/train.py"}


def test_a_model_is_freed_after_its_profile(tmp_path):
    """diff keeps one run's model at a time: nothing global may keep an analyzed model alive."""
    import gc
    import weakref

    from warptrace.analysis.diff.profile import build_profile
    from warptrace.analysis.report import analyze_model, build_model

    profile = build_profile(read_trace(_loop_program(20, distinct=False).write(tmp_path / "a.wtrace")))
    model = profile.report.model
    assert model is None
    # and nothing global keeps an analyzed model alive
    model = build_model(read_trace(tmp_path / "a.wtrace"))
    report = analyze_model(model)
    report.model = None
    alive = weakref.ref(model)
    del model
    gc.collect()
    assert alive() is None
    assert profile.report.findings
