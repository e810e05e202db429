"""The bundled examples, end to end through the CLI as a newcomer runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _record_and_analyze(script: Path, tmp_path: Path) -> tuple[subprocess.CompletedProcess, dict]:
    trace = tmp_path / (script.stem + ".wtrace")
    run = subprocess.run(
        [sys.executable, "-m", "warptrace", "-o", str(trace), str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    analyzed = subprocess.run(
        [sys.executable, "-m", "warptrace", "analyze", str(trace), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert analyzed.returncode in (0, 1), analyzed.stderr
    return run, json.loads(analyzed.stdout)


def _last_line_of(script: Path, text: str) -> int:
    return [i for i, line in enumerate(script.read_text().splitlines(), start=1) if text in line][-1]


def test_projectile_reports_the_ping_pong_overwrite(tmp_path):
    script = EXAMPLES / "projectile.py"
    run, report = _record_and_analyze(script, tmp_path)
    assert run.returncode == 0, run.stderr
    assert "final loss" in run.stdout
    assert "error WT101 overwrite-after-read" in run.stderr  # printed after the run
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    # the taped launch in main(), not the identical line in the finite-difference helper
    launch_line = _last_line_of(script, "wp.launch(integrate, 1, inputs=[q, v], outputs=[q_next, v_next])")
    assert [(f["code"], Path(f["location"]["file"]).name, f["location"]["line"]) for f in errors] == [
        ("WT101", "projectile.py", launch_line)
    ]
    roles = {loc["role"] for loc in errors[0]["related"]}
    assert {"read", "allocation", "backward"} <= roles


def test_projectile_fixed_is_clean(tmp_path):
    run, report = _record_and_analyze(EXAMPLES / "projectile_fixed.py", tmp_path)
    assert run.returncode == 0, run.stderr
    assert report["findings"] == []
