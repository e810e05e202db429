"""A diverging optimization is not a kernel that makes NaN: WT505, WT501's "moderate inputs",
and how the health timeline, ``show --numerics`` and the HTML report tell the two apart.

The findings' codes and lines are proven by the zoo (``wt505_*``, ``*_diverge*``,
``wt501_log_overshoot``); here: the story each finding tells (growth, overflow, cause or
step size, the ``gradcheck --at`` command), the recorded leaf changes the curvature comes
from, and the pieces on their own (growth, magnitudes, float limits, cause naming).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import warptrace
from tests.recorded import ROOT
from tests.zoo import discover, load
from warptrace.analysis.divergence import _growth
from warptrace.analysis.findings import Finding, Location, Severity
from warptrace.analysis.overflow import GROWTH, InputScale, float_max
from warptrace.analysis.rules import divergence as wt505
from warptrace.cli import main
from warptrace.trace.reader import read_trace

PROGRAMS = {p.name: p for p in discover()}


def _record(name: str, folder: Path) -> Path:
    pytest.importorskip("warp")
    path = folder / f"{name}.wtrace"
    old = os.getcwd()
    os.chdir(ROOT)
    try:
        module = load(PROGRAMS[name], module_name=f"divergence_{name}")
        warptrace.start(path, numerics=True)
        try:
            module.run()
        finally:
            warptrace.stop()
    finally:
        os.chdir(old)
    return path


@pytest.fixture(scope="module")
def stiff(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _record("wt505_stiff_spring", tmp_path_factory.mktemp("divergence"))


def _line(name: str, text: str) -> int:
    lines = PROGRAMS[name].path.read_text().splitlines()
    return next(n for n, line in enumerate(lines, start=1) if text in line)


# ------------------------------------------------------------------ the correct program
def test_a_correct_program_that_diverges_gets_one_warning_and_the_step_size_story(stiff: Path) -> None:
    report = warptrace.analyze(stiff)
    (found,) = report.findings
    assert (found.code, found.severity) == ("WT505", Severity.WARNING)
    assert found.location.line == _line("wt505_stiff_spring", "# expect: WT505")
    message = found.message
    assert "the loss grew from 0.205 at step 5" in message
    assert "kernel `spring_energy`" in message and "not a domain error" in message
    assert "No error finding upstream: the gradient may be right and the step size too large" in message
    # lr 0.013 against the stiff mode's curvature L = 201 (2/L = 0.00995), measured along the path
    assert "step size of 0.013, above 2/L = 0.00995 from step 5" in message
    # the step before growth began is backward 5 (steps count from 0, backward calls from 1)
    assert "python -m warptrace gradcheck --at 5 " in message
    roles = {loc.role: loc.line for loc in found.related}
    assert roles["backward"] == _line("wt505_stiff_spring", "tape.backward(energy)")
    assert roles["first non-finite"] == _line("wt505_stiff_spring", "wp.launch(spring_energy")
    assert found.evidence["start_step"] == 5 and found.evidence["causes"] == []


def test_the_recorder_keeps_leaf_values_and_their_changes(stiff: Path) -> None:
    rows = read_trace(stiff).tables["numerics"].to_pylist()
    whats = {row["what"] for row in rows}
    assert {"leaf", "leaf_change", "grad_change"} <= whats
    leaf = [row for row in rows if row["what"] == "leaf"]
    changes = [row for row in rows if row["what"] == "leaf_change"]
    assert len(leaf) == 110 and len(changes) == 109  # every backward; a change from the second on
    grad_changes = [row for row in rows if row["what"] == "grad_change"]
    assert all(row["owner"] == leaf[0]["array_id"] for row in grad_changes)


def test_health_timeline_carries_norms_updates_curvature_and_the_verdict(stiff: Path, capsys) -> None:
    assert main(["analyze", "--format", "json", str(stiff)]) == 0
    (series,) = json.loads(capsys.readouterr().out)["health"]
    steps = series["steps"]
    assert steps[0]["updated"] is None and all(step["updated"] for step in steps[1:100])
    assert steps[1]["params"]["x"]["l2"] == pytest.approx(7.78, rel=1e-3)
    assert 2.0 / steps[50]["curvature"] == pytest.approx(0.00995, rel=1e-2)
    assert steps[50]["step_size"] == pytest.approx(0.013, rel=1e-3)
    verdict = series["divergence"]
    assert (verdict["start_step"], verdict["last_finite_step"], verdict["nonfinite_step"]) == (5, 102, 103)
    assert verdict["quantity"] == "loss" and verdict["curvature"]["from_step"] == 5


def test_show_numerics_marks_where_growth_began(stiff: Path, capsys) -> None:
    assert main(["show", "--numerics", str(stiff)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip() and line.split()[0].isdigit()}
    assert "<- growth begins (divergence, WT505)" in rows["5"]
    assert "<- first non-finite value" in rows["103"]
    assert "|x|" in out  # parameter norms next to the gradient norms
    assert "divergence: the loss grew from 0.205 at step 5 to 2.61e+38 at step 102" in out


def test_html_report_draws_the_health_chart(stiff: Path) -> None:
    from warptrace.report import html

    report = warptrace.analyze(stiff)
    data = html.report_data(report, report.model)
    (chart,) = data["health"]
    assert chart["steps"] == 110 and len(chart["x"]) == 110
    assert chart["divergence"]["start_step"] == 5
    assert chart["loss"][103] is None and chart["nonfinite"][103]
    document = html.render(report)
    assert 'id="health"' in document and "renderHealth" in document


# ------------------------------------------------------------------ a bug behind it
def test_a_divergence_after_a_bug_names_it(tmp_path: Path) -> None:
    report = warptrace.analyze(_record("wt203_cube_diverges", tmp_path))
    assert [f.code for f in report.findings] == ["WT203", "WT505"]
    found = report.by_code("WT505")[0]
    assert found.message.count("Likely cause:") == 1
    assert "Likely cause: WT203 (grad-not-zeroed) at wt203_cube_diverges.py:" in found.message
    assert "the step size too large" not in found.message
    assert found.evidence["causes"] == ["WT203"]
    causes = [loc for loc in found.related if loc.role == "cause (WT203)"]
    assert [loc.line for loc in causes] == [_line("wt203_cube_diverges", "# expect: WT203")]


def _finding(code: str, severity: Severity, first_seq: int, message: str = "m") -> Finding:
    return Finding(
        code=code,
        name=code.lower(),
        severity=severity,
        message=message,
        location=Location("/p/train.py", first_seq, text="x"),
        evidence={"first_seq": first_seq},
    )


def test_review_names_errors_before_the_overflow_and_warnings_only_as_possible() -> None:
    story = "the optimization diverged: ...."
    advice = f"{wt505._NO_ERROR}: the gradient may be right and the step size too large."

    def divergence() -> Finding:
        item = _finding("WT505", Severity.WARNING, 50, f"{story} {advice}")
        item.evidence["first_nonfinite_seq"] = 90
        return item

    later = _finding("WT101", Severity.ERROR, 95)  # after the first non-finite value: not a cause
    seed = _finding("WT304", Severity.WARNING, 10)
    info = _finding("WT408", Severity.INFO, 5)
    (_, _, _, item) = wt505.review([later, seed, info, divergence()])
    assert item.message.startswith(story + " Possible cause: WT304 (wt304) at train.py:10")
    assert advice in item.message and item.evidence["causes"] == ["WT304"]
    error = _finding("WT203", Severity.ERROR, 20)
    (*_, item) = wt505.review([error, error, seed, divergence()])
    assert item.message == (
        f"{story} Likely cause: WT203 (wt203) at train.py:20: a wrong gradient drives the growth; "
        "fix it first, then look at the step size."
    )
    (item,) = wt505.review([divergence()])
    assert item.message == f"{story} {advice}"


# ------------------------------------------------------------------ the pieces
def test_growth_needs_new_highs_and_a_factor_after_the_last_minimum() -> None:
    assert _growth([1.0, 0.5, 0.2, 0.4, 3.0, 40.0, 900.0]) == (2, 4)
    assert _growth([1.0, 0.5, 0.2, 0.4, 0.3, 0.5, 0.4]) is None  # bounded oscillation
    assert _growth([1.0, 0.5, 0.2, 50.0, 1e6]) is None  # two new highs only
    assert _growth([1.0, 2.0, 3.0, 4.0]) is None  # four-fold: not a blow-up
    assert _growth([1.0, None, 1e3, 1e6, 1e9]) is None


def test_float_limits_by_warp_dtype_name() -> None:
    assert float_max("float") == float_max("float32") == float_max("vec3f") == float(np.finfo(np.float32).max)
    assert (
        float_max("float64")
        == float_max("vec3d")
        == float_max("transformd")
        == float(np.finfo(np.float64).max)
    )
    assert float_max("float16") == float_max("mat33h") == 65504.0


def test_moderate_inputs_are_neither_huge_nor_grown() -> None:
    limit = float_max("float32") ** 0.4
    assert limit == pytest.approx(2.6e15, rel=0.05)
    assert InputScale(4.5, limit, 1.0, "", 0).moderate
    assert not InputScale(1.8e18, limit, 1.0, "", 0).moderate  # a square of it overflows
    grown = InputScale(1e6, limit, GROWTH * 10, "x", 32)
    assert (
        not grown.moderate
        and "argument `x`" in grown.describe()
        and "32 earlier launches" in grown.describe()
    )
    # risen from rounding noise to ordinary values: still moderate (a domain error there is WT501)
    assert InputScale(2.0, limit, GROWTH * 10, "x", 32).moderate


def test_huge_inputs_from_the_start_are_not_a_domain_origin(tmp_path: Path) -> None:
    wp = pytest.importorskip("warp")

    @wp.kernel
    def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = x[i] * x[i]

    @wp.kernel
    def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
        wp.atomic_add(loss, 0, y[wp.tid()])

    path = tmp_path / "huge.wtrace"
    warptrace.start(path, numerics=True)
    try:
        x = wp.array(np.array([1e20, 1.0], dtype=np.float32), dtype=float, requires_grad=True, device="cpu")
        y = wp.zeros(2, dtype=float, requires_grad=True, device="cpu")
        loss = wp.zeros(1, dtype=float, requires_grad=True, device="cpu")
        tape = wp.Tape()
        with tape:
            wp.launch(square, dim=2, inputs=[x], outputs=[y], device="cpu")
            wp.launch(total, dim=2, inputs=[y], outputs=[loss], device="cpu")
        tape.backward(loss)
    finally:
        warptrace.stop()
    assert not [f for f in warptrace.analyze(path).findings if f.code in ("WT501", "WT505")]


def test_the_leaf_copies_stay_bounded_when_every_step_makes_new_parameters(tmp_path: Path) -> None:
    wp = pytest.importorskip("warp")
    from warptrace.record.numerics import current

    @wp.kernel
    def energy(p: wp.array(dtype=float), loss: wp.array(dtype=float)):
        wp.atomic_add(loss, 0, p[wp.tid()] * p[wp.tid()])

    warptrace.start(tmp_path / "fresh.wtrace", numerics=True)
    try:
        values = np.ones(4, dtype=np.float32)
        for _ in range(600):
            p = wp.array(values, dtype=float, requires_grad=True, device="cpu")
            loss = wp.zeros(1, dtype=float, requires_grad=True, device="cpu")
            tape = wp.Tape()
            with tape:
                wp.launch(energy, dim=4, inputs=[p], outputs=[loss], device="cpu")
            tape.backward(loss)
            values = values - 0.1 * p.grad.numpy()
        kept = len(current.numerics.previous)
    finally:
        warptrace.stop()
    assert kept <= 512  # the copies of the 600 dead parameter arrays are dropped as they pile up
