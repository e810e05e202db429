"""gradcheck / bisect --run with their runs side by side (--jobs N) and as Ray tasks (--ray).

The verdict and every measured number must be those of the serial run: the runs are the
same processes, only started earlier. Timing is reported, never asserted.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from warptrace.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
EPS = "1e-2,1e-3"
TIMING = ("runs", "elapsed_s", "parallel")
RAY_COMMAND = (sys.executable, "-m", "warptrace", "gradcheck")


@cache
def _measure(argv: tuple[str, ...]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main([*argv[:-1], "-q", "--format", "json", "--eps", EPS, argv[-1]])
    return status, out.getvalue()


def measure(*argv: str) -> tuple[int, dict]:
    status, text = _measure(argv)
    return status, json.loads(text)


def _without_timing(result: dict) -> dict:
    return {key: value for key, value in result.items() if key not in TIMING}


@pytest.mark.parametrize("command", [("gradcheck",), ("bisect", "--run")], ids=["gradcheck", "bisect"])
def test_jobs_2_gives_the_serial_verdict_and_numbers(command):
    script = str(EXAMPLES / "projectile.py")
    serial_status, serial = measure(*command, script)
    status, parallel = measure(*command, "--jobs", "2", script)
    assert (status, parallel["verdict"]) == (serial_status, serial["verdict"]) == (1, "disagree")
    assert _without_timing(parallel) == _without_timing(serial)
    assert [run["name"] for run in parallel["runs"]] == [run["name"] for run in serial["runs"]]
    assert parallel["parallel"] == "2 jobs" and serial["parallel"] is None
    # the two unperturbed runs ran on different workers: the determinism check covers both
    workers = {run["name"]: run["worker"] for run in parallel["runs"]}
    assert workers["unperturbed-1"] == "worker 1" and workers["unperturbed-2"] == "worker 2"
    assert all(run["status"] in ("ok", "ended", "stopped") for run in parallel["runs"])
    assert parallel["elapsed_s"] > 0


def test_jobs_text_report_shows_the_elapsed_time(capsys):
    assert main(["gradcheck", "-q", "-j", "2", "--eps", "1e-2", str(EXAMPLES / "projectile_fixed.py")]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("runs: 5 fresh processes, ") and " elapsed with 2 jobs (record " in last


# a loss that depends on the CUDA device the run was given: workers that compute differently
BY_DEVICE = """
import os
import numpy as np
import warp as wp

wp.config.quiet = True

@wp.kernel
def square(x: wp.array(dtype=float), bias: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i] + bias)

bias = 0.5 if os.environ.get("CUDA_VISIBLE_DEVICES") == "1" else 0.0
x = wp.array(np.linspace(0.5, 1.0, 8), dtype=float, requires_grad=True, device="cpu")
loss = wp.zeros(1, dtype=float, requires_grad=True, device="cpu")
tape = wp.Tape()
with tape:
    wp.launch(square, 8, inputs=[x, bias], outputs=[loss], device="cpu")
tape.backward(loss)
print(x.grad.numpy())
"""

UNSEEDED = BY_DEVICE.replace("np.linspace(0.5, 1.0, 8)", "np.random.rand(8)").replace("0.5 if", "0.0 if")


def test_a_mismatch_between_workers_is_reported_as_such(tmp_path, monkeypatch, capsys):
    script = tmp_path / "by_device.py"
    script.write_text(BY_DEVICE)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # one device per worker (none is touched here)
    status = main(["gradcheck", "-q", "-j", "2", "--format", "json", "--eps", EPS, str(script)])
    result = json.loads(capsys.readouterr().out)
    assert status == 4 and result["verdict"] == "undecided"
    assert result["reason"].startswith("the workers do not compute the same result")
    assert "worker 1 (CUDA device 0)" in result["reason"] and "worker 2 (CUDA device 1)" in result["reason"]
    ran = {run["name"]: run for run in result["runs"]}
    assert ran["unperturbed-3"]["worker"] == ran["unperturbed-1"]["worker"]


def test_a_program_that_does_not_repeat_itself_is_not_blamed_on_the_workers(tmp_path, capsys):
    script = tmp_path / "unseeded.py"
    script.write_text(UNSEEDED)
    status = main(["gradcheck", "-q", "-j", "2", "--format", "json", "--eps", EPS, str(script)])
    result = json.loads(capsys.readouterr().out)
    assert status == 4 and result["deterministic"] is False
    assert "not deterministic" in result["reason"]
    # the perturbed runs asked for ahead were cancelled or killed, not measured
    assert all(run["status"] == "cancelled" for run in result["runs"] if run["name"].startswith("eps="))


@pytest.mark.parametrize("argv", [["--jobs", "0"], ["--jobs", "two"], ["--ray=127.0.0.1:1"]])
def test_bad_launch_options_exit_2_with_one_line(argv, capsys):
    assert main(["gradcheck", *argv, str(EXAMPLES / "projectile.py")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("warptrace: error:") and len(err.strip().splitlines()) == 1


def test_ray_missing_is_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    assert main(["gradcheck", "--ray", str(EXAMPLES / "projectile.py")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "warptrace: error: --ray needs the ray package on this machine and the cluster's "
        "(pip install 'warptrace[ray]')"
    )


def test_ray_runs_give_the_serial_verdict(tmp_path):
    """A local Ray instance (CPU) started here; gradcheck connects to it from its own process
    and ships the working directory (a folder holding only the program)."""
    ray = pytest.importorskip("ray")
    shutil.copy(EXAMPLES / "projectile.py", tmp_path / "projectile.py")
    context = ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
    try:
        address = context.address_info["address"]
        done = subprocess.run(
            [*RAY_COMMAND, f"--ray={address}", "-q", "--format", "json", "--eps", EPS, "projectile.py"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        ray.shutdown()
    assert done.returncode == 1, done.stderr[-2000:]
    result = json.loads(done.stdout)
    _, serial = measure("gradcheck", str(EXAMPLES / "projectile.py"))
    for key in ("verdict", "objective", "deterministic", "end_to_end"):
        assert result[key] == serial[key], key
    assert result["parallel"].startswith("Ray cluster")
    assert [run["name"] for run in result["runs"]] == [run["name"] for run in serial["runs"]]
    assert all(run["worker"].startswith("Ray node 1") for run in result["runs"][1:])
    # the paths in the report are this machine's, not the Ray task's copy
    assert result["parameters"][0]["first_read"]["file"] == str(tmp_path / "projectile.py")
