"""The bisection plan (pure: a trace in, cuts out) and the float32-aware verdict."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from warptrace.analysis.bisect import _binary_order, choose_recording, make_plan, step_structure
from warptrace.analysis.measure import measurement
from warptrace.analysis.model import Model
from warptrace.analysis.report import analyze_trace
from warptrace.cli import main
from warptrace.probe.verdict import compare
from warptrace.trace.reader import read_trace

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
PROJECTILE = EXAMPLES / "projectile.py"


def _line_of(script: Path, text: str) -> int:
    return [i for i, line in enumerate(script.read_text().splitlines(), start=1) if text in line][-1]


@pytest.fixture(scope="module")
def projectile_trace(tmp_path_factory) -> Path:
    trace = tmp_path_factory.mktemp("plan") / "projectile.wtrace"
    subprocess.run(
        [sys.executable, "-m", "warptrace", "-q", "--no-analyze", "-o", str(trace), str(PROJECTILE)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return trace


# ------------------------------------------------------------------ steps


def test_step_structure_finds_the_period_after_a_prefix():
    steps = step_structure([9, 1, 2, 3, 1, 2, 3, 1, 2, 3, 7])
    assert (steps.prefix, steps.period, steps.count) == (1, 3, 3)
    assert steps.boundaries() == [1, 4, 7, 10]
    assert steps.step_of(5) == 1 and steps.step_of(0) is None and steps.step_of(10) is None
    assert steps.describe() == "3 operations x 3 steps, after 1 before the first step, then 1 after the last"


def test_step_structure_without_repetition():
    steps = step_structure([1, 2, 3])
    assert steps.count < 2
    assert steps.describe() == "3 operations, no repeated step"


def test_binary_order_is_breadth_first_midpoints():
    assert _binary_order([1, 2, 3, 4, 5, 6, 7]) == [4, 2, 6, 1, 3, 5, 7]


# ------------------------------------------------------------------ plan on a real trace


def test_projectile_plan(projectile_trace: Path):
    trace = read_trace(projectile_trace)
    model = Model(trace)
    findings = analyze_trace(trace).findings
    plan = make_plan(model, choose_recording(model, findings), findings)
    launch_line = _line_of(PROJECTILE, "wp.launch(integrate, 1")
    assert len(plan.recording.events) == 17 and plan.recording.backward == 1
    assert (plan.steps.prefix, plan.steps.period, plan.steps.count) == (0, 1, 16)
    assert [cut.k for cut in plan.cuts[:3]] == [8, 4, 2]  # binary-search order over step boundaries
    assert all("WT101" in cut.near_findings for cut in plan.cuts[:3])
    by_k = {cut.k: cut for cut in plan.cuts}
    live = {(b.label, b.allocation.line) for b in by_k[1].live}
    assert live == {
        ("q_a", _line_of(PROJECTILE, "q_a = wp.zeros")),
        ("v_a", _line_of(PROJECTILE, "v_a = wp.zeros")),
    }
    leaves = {leaf.label: leaf for leaf in plan.leaves}
    assert leaves["v0"].first_position == 0
    assert leaves["v0"].allocation.line == _line_of(PROJECTILE, "v0 = wp.array")
    assert {op["line"] for op in plan.operations[:16]} == {launch_line}


def test_measurement_reads_the_gradient_the_program_reads(projectile_trace: Path):
    chosen = measurement(Model(read_trace(projectile_trace)))
    assert chosen.undecided is None
    assert chosen.backwards == [1]
    assert [p.label for p in chosen.params] == ["v0"]  # q0 has a grad too, but nobody reads it
    assert chosen.params[0].read_location.line == _line_of(PROJECTILE, "wp.launch(integrate, 1")


def test_bisect_plan_cli(projectile_trace: Path, capsys):
    assert main(["bisect", str(projectile_trace)]) == 0
    text = capsys.readouterr().out
    assert "steps: 1 operation x 16 steps, then 1 after the last" in text
    assert "k=8" in text and "live: v_a" in text
    assert main(["bisect", str(projectile_trace), "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert plan["steps"]["period"] == 1 and plan["steps"]["count"] == 16
    assert plan["cuts"][0]["k"] == 8
    assert [leaf["label"] for leaf in plan["leaves"]] == ["q0", "v0"]


def test_bisect_plan_cli_unknown_tape(projectile_trace: Path, capsys):
    assert main(["bisect", str(projectile_trace), "--tape", "999"]) == 2
    assert "tape 999 is not backpropagated" in capsys.readouterr().err


def test_bisect_plan_needs_no_warp(projectile_trace: Path):
    code = (
        "import sys; sys.modules['warp'] = None\n"
        "from warptrace.cli import main\n"
        f"sys.exit(main(['bisect', {str(projectile_trace)!r}, '--format', 'json']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


# ------------------------------------------------------------------ verdict


def _sweep(pairs: list[tuple[float, float]], h: float = 1e-3) -> list[tuple[float, float, float, float]]:
    return [
        (h * 10**-i, fd * 2 * h * 10**-i, ad * 2 * h * 10**-i, 2 * h * 10**-i)
        for i, (fd, ad) in enumerate(pairs)
    ]


def test_verdict_agree_disagree():
    assert compare(_sweep([(1.0, 1.0005), (1.0, 1.0)]), resolution=1e-9).verdict == "agree"
    assert compare(_sweep([(1.0, 2.0), (1.0001, 2.0)]), resolution=1e-9).verdict == "disagree"


def test_verdict_unresolved_objective_is_undecided():
    result = compare(_sweep([(1.0, 2.0), (1.0, 2.0)]), resolution=1.0)
    assert result.verdict == "undecided"
    assert "cannot resolve" in (result.reason or "")
    assert not any(point.resolved for point in result.points)


def test_verdict_unstable_finite_differences_prove_nothing():
    result = compare(_sweep([(1.0, 3.0), (2.0, 3.0)]), resolution=1e-9)
    assert result.verdict == "undecided"
    assert "do not settle" in (result.reason or "")


def test_verdict_at_a_kink_is_undecided():
    # max(x, 0) at 0: right slope 2, left slope 0 at every eps; central FD 1, the gradient 2 (a valid subgradient)
    sweep = _sweep([(1.0, 2.0), (1.0, 2.0)])
    one_sided = [(2.0 * two_h / 2, 0.0) for _, _, _, two_h in sweep]
    result = compare(sweep, resolution=1e-12, one_sided=one_sided)
    assert result.verdict == "undecided"
    assert "kink" in (result.reason or "") and "valid subgradient" in (result.reason or "")


def test_verdict_curvature_is_no_kink():
    # a smooth objective: the one-sided differences part by O(h^2), so the gap shrinks with eps
    sweep = _sweep([(1.0, 2.0), (1.0, 2.0)])
    one_sided = [((1.0 + 50 * two_h) * two_h / 2, (1.0 - 50 * two_h) * two_h / 2) for _, _, _, two_h in sweep]
    assert compare(sweep, resolution=1e-12, one_sided=one_sided).verdict == "disagree"


def test_verdict_both_zero_agree():
    assert compare(_sweep([(0.0, 0.0), (0.0, 0.0)]), resolution=1e-9).verdict == "agree"


# ------------------------------------------------------------------ measurement choices


PROGRAMS = Path(__file__).resolve().parent / "programs"


def _record(script: Path, tmp_path: Path) -> Model:
    trace = tmp_path / (script.stem + ".wtrace")
    subprocess.run(
        [sys.executable, "-m", "warptrace", "-q", "--no-analyze", "-o", str(trace), str(script)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return Model(read_trace(trace))


def test_parameter_is_perturbed_at_its_first_read_in_time(tmp_path):
    # two tapes record, then backpropagate in the opposite order
    script = PROGRAMS / "wt103_other_tape_fixed.py"
    chosen = measurement(_record(script, tmp_path))
    assert chosen.backwards == [1, 2]
    (param,) = chosen.params
    assert (param.label, param.backward, param.tape_ordinal, param.position) == ("w", 2, 0, 0)
    assert param.read_location.line == _line_of(script, "wp.launch(featurize, dim=N, inputs=[x, w]")


def test_uncleared_gradient_measures_the_read_that_holds_both_backwards(tmp_path):
    chosen = measurement(_record(PROGRAMS / "wt203_train_loop.py", tmp_path))
    assert chosen.backwards == [1, 2]
    assert any("not cleared between reads 1 and 2" in note for note in chosen.notes)
    fixed = measurement(_record(PROGRAMS / "wt203_train_loop_fixed.py", tmp_path))
    assert fixed.backwards == [1] and not fixed.notes


def test_objective_finished_off_the_tape_is_named(tmp_path):
    script = PROGRAMS / "wt305_seed_total.py"
    chosen = measurement(_record(script, tmp_path))
    assert chosen.objective_off_tape is not None
    assert f"{script}:{_line_of(script, 'wp.launch(finalize')}" in chosen.objective_off_tape
    assert measurement(_record(PROGRAMS / "wt305_seed_total_fixed.py", tmp_path)).objective_off_tape is None
