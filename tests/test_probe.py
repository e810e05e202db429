"""gradcheck and bisect --run on real programs: probe runs are fresh processes running Warp on the CPU.

Each measurement costs 1 recording + 2 unperturbed + 2 per eps runs (7 here, two eps),
so only a handful of zoo programs are measured here; ``tools/check_probe_zoo.py``
sweeps every buggy program and fixed twin.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from warptrace.cli import main

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "tests" / "programs"
EXAMPLES = ROOT / "examples"
EPS = "1e-2,1e-3"


def _line_of(script: Path, text: str) -> int:
    return [i for i, line in enumerate(script.read_text().splitlines(), start=1) if text in line][-1]


@cache
def _measure(command: str, script: str) -> tuple[int, str]:
    import contextlib
    import io

    out = io.StringIO()
    argv = [command, "--run"] if command == "bisect" else [command]
    with contextlib.redirect_stdout(out):
        status = main([*argv, "-q", "--format", "json", "--eps", EPS, script])
    return status, out.getvalue()


def measure(command: str, script: Path) -> tuple[int, dict]:
    status, text = _measure(command, str(script))
    return status, json.loads(text)


def _locations(result: dict) -> list[tuple[str, int]]:
    return [(Path(loc["file"]).name, loc["line"]) for loc in result["first_disagreeing"]["locations"]]


# ------------------------------------------------------------------ localization


@pytest.mark.parametrize(
    ("script", "cut", "launch_text"),
    [
        # ping-pong state buffers: step 1 reads the buffer step 2 overwrites
        (EXAMPLES / "projectile.py", 2, "wp.launch(integrate, 1"),
        # one force buffer per rollout: step 0's integrate adjoint sees the last force
        (PROGRAMS / "wt101_force_reuse.py", 2, "wp.launch(integrate,"),
        # severed chain: `hidden` has no grad, so its writer's adjoint never runs
        (PROGRAMS / "wt301_zeros.py", 1, "wp.launch(lift,"),
        # wrong custom adjoint in the launch of one step
        (PROGRAMS / "wt502_custom_adjoint_step.py", 5, "wp.launch(bounce,"),
    ],
    ids=["pingpong", "force_reuse", "severed", "custom_adjoint"],
)
def test_bisect_run_names_the_first_disagreeing_cut_and_launch(script: Path, cut: int, launch_text: str):
    status, result = measure("bisect", script)
    assert status == 1, result
    assert result["verdict"] == "disagree"
    assert result["end_to_end"]["verdict"] == "disagree"
    first = result["first_disagreeing"]
    assert first["cut"] == cut
    assert _locations(result) == [(script.name, _line_of(script, launch_text))]
    verdicts = {c["k"]: c["verdict"] for c in result["cuts"]}
    assert all(verdicts[k] == "agree" for k in verdicts if k <= first["last_agreeing_cut"])


def test_bisect_run_reports_the_finding_at_the_bracket():
    _, result = measure("bisect", EXAMPLES / "projectile.py")
    findings = result["first_disagreeing"]["findings"]
    assert [(f["code"], Path(f["file"]).name, f["line"]) for f in findings] == [
        ("WT101", "projectile.py", 92)
    ]


@pytest.mark.parametrize(
    "script",
    [EXAMPLES / "projectile_fixed.py", PROGRAMS / "wt502_custom_adjoint_step_fixed.py"],
    ids=["projectile_fixed", "custom_adjoint_fixed"],
)
def test_bisect_run_on_fixed_twins_every_cut_agrees(script: Path):
    status, result = measure("bisect", script)
    assert status == 0, result
    assert result["verdict"] == "agree"
    assert result["cuts"] and all(c["verdict"] == "agree" for c in result["cuts"])
    assert result["first_disagreeing"] is None


def test_truncated_horizon_tape_agrees_end_to_end_does_not():
    status, result = measure("bisect", PROGRAMS / "wt302_frames.py")
    assert status == 1
    assert result["end_to_end"]["verdict"] == "disagree"
    assert result["cuts"] and all(c["verdict"] == "agree" for c in result["cuts"])
    assert result["first_disagreeing"] is None
    assert any("across tapes" in note for note in result["notes"])
    assert [w["backward"] for w in result["window"]] == [1, 2, 3, 4]  # the accumulated frames


def test_truncated_horizon_fixed_twin_agrees():
    status, result = measure("gradcheck", PROGRAMS / "wt302_frames_fixed.py")
    assert status == 0, result
    assert result["verdict"] == "agree"


# ------------------------------------------------------------------ gradcheck


def test_gradcheck_projectile_pair():
    # the buggy one's end-to-end numbers come from its bisect run (same measurement)
    _, buggy = measure("bisect", EXAMPLES / "projectile.py")
    assert [p["label"] for p in buggy["parameters"]] == ["v0"]
    assert buggy["deterministic"] is True
    sweep = buggy["end_to_end"]["sweep"]
    assert [point["eps"] for point in sweep] == [1e-2, 1e-3]
    assert all(point["resolved"] and point["rel_error"] > 0.3 for point in sweep)
    status, fixed = measure("gradcheck", EXAMPLES / "projectile_fixed.py")
    assert status == 0
    assert fixed["verdict"] == "agree" and fixed["command"] == "gradcheck"
    assert "cuts" not in fixed
    assert len(fixed["runs"]) == 1 + 2 + 2 * 2
    assert all(run["wall_s"] > 0 for run in fixed["runs"])


UNSEEDED = """
import numpy as np
import warp as wp

wp.config.quiet = True

@wp.kernel
def scale(x: wp.array(dtype=float), w: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, w[i] * x[i] * x[i])

x = wp.array(np.random.rand(8), dtype=float)  # a fresh draw every run
w = wp.array(np.ones(8), dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(scale, 8, inputs=[x, w], outputs=[loss])
tape.backward(loss)
print(w.grad.numpy())
"""

NO_TAPE = """
import warp as wp

wp.config.quiet = True
x = wp.zeros(4, dtype=float, requires_grad=True)
print(x.numpy())
"""


def test_unseeded_randomness_is_undecided(tmp_path, capsys):
    script = tmp_path / "unseeded.py"
    script.write_text(UNSEEDED)
    status = main(["gradcheck", "-q", "--format", "json", "--eps", EPS, str(script)])
    result = json.loads(capsys.readouterr().out)
    assert status == 4
    assert result["verdict"] == "undecided"
    assert result["deterministic"] is False
    assert "not deterministic" in result["reason"]


def test_undecided_text_report_says_why(tmp_path, capsys):
    script = tmp_path / "unseeded.py"
    script.write_text(UNSEEDED)
    assert main(["gradcheck", "-q", "--eps", EPS, str(script)]) == 4
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("unseeded.py: UNDECIDED")
    assert any(line.startswith("deterministic: NO (two unperturbed runs differ by") for line in lines)
    assert any(line.startswith("undecided: the program is not deterministic") for line in lines)
    assert lines[-1].startswith("runs: 3 fresh processes")


def test_no_tape_is_undecided(tmp_path, capsys):
    script = tmp_path / "no_tape.py"
    script.write_text(NO_TAPE)
    status = main(["bisect", "--run", "-q", "--format", "json", str(script)])
    result = json.loads(capsys.readouterr().out)
    assert status == 4
    assert result["verdict"] == "undecided"
    assert "never backpropagates" in result["reason"]
    assert len(result["runs"]) == 1


# ------------------------------------------------------------------ usage


@pytest.mark.parametrize(
    "argv",
    [
        ["gradcheck", "missing_script.py"],
        ["gradcheck", "--eps", "0", str(EXAMPLES / "projectile.py")],
        ["gradcheck", "--eps", "x", str(EXAMPLES / "projectile.py")],
        ["bisect", "--run", "--tape", "1", str(EXAMPLES / "projectile.py")],
        ["bisect", "plan.wtrace", "extra"],
        ["gradcheck"],
    ],
)
def test_usage_errors_exit_2(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("warptrace: error:") and len(err.strip().splitlines()) == 1


def test_bisect_refines_inside_the_bracket_when_one_round_cannot_measure_every_cut(monkeypatch):
    import warptrace.probe.driver as driver

    monkeypatch.setattr(driver, "MAX_CUTS", 4)
    options = driver.Options(str(EXAMPLES / "projectile.py"), [], eps=(1e-2, 1e-3), cuts=True)
    probe = driver.Driver(options)
    try:
        result = probe.run()
    finally:
        probe.cleanup()
    measured = [c.cut.k for c in result.cuts]
    assert measured == [1, 2, 4, 6, 8]  # round 1: 8, 4, 2, 6; round 2: 1, inside (0, 2)
    assert result.first_disagreeing is not None
    assert (result.first_disagreeing["last_agreeing_cut"], result.first_disagreeing["cut"]) == (1, 2)
    assert [run.name for run in result.runs].count("round2-unperturbed") == 1
    assert len(result.runs) == 7 + 1 + 2 * 2


def test_gradcheck_and_bisect_run_a_module(tmp_path, monkeypatch, capsys):
    # `-m MODULE ARGS`, like the run command: the probe processes run it with runpy
    (tmp_path / "projectile_mod.py").write_text((EXAMPLES / "projectile_fixed.py").read_text())
    monkeypatch.chdir(tmp_path)
    status = main(["gradcheck", "-q", "--format", "json", "--eps", EPS, "-m", "projectile_mod"])
    result = json.loads(capsys.readouterr().out)
    assert status == 0 and result["verdict"] == "agree"
    assert [p["label"] for p in result["parameters"]] == ["v0"]
    assert main(["gradcheck", "-q", "-m", "no_such_module_here"]) == 2
    assert "No module named no_such_module_here" in capsys.readouterr().err
    assert main(["bisect", "-m", "projectile_mod"]) == 2  # a plan reads a trace
    assert "-m MODULE: only with --run" in capsys.readouterr().err
