"""The report commands end to end: ``analyze --format html|sarif -o``, ``export --perfetto``,
``python -m warptrace --html``, and ``import warptrace.auto`` printing what a run prints."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.recorded import ROOT, record
from warptrace.cli import main

PROGRAM = ROOT / "tests" / "programs" / "wt101_force_reuse.py"


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return record("wt101_force_reuse", tmp_path_factory.mktemp("cli"))[1]


def _python(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("CI", None)
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.mark.parametrize("fmt", ["html", "sarif"])
def test_analyze_writes_the_report_to_a_file(trace, tmp_path, capsys, fmt):
    out = tmp_path / f"report.{fmt}"
    assert main(["analyze", trace, "--format", fmt, "-o", str(out)]) == 1  # an error finding
    assert capsys.readouterr().out == ""
    text = out.read_text()
    if fmt == "html":
        assert text.startswith("<!DOCTYPE html>") and "WT101" in text
    else:
        assert json.loads(text)["runs"][0]["results"][0]["ruleId"] == "WT101"


def test_analyze_output_unwritable_is_one_line(trace, tmp_path, capsys):
    assert main(["analyze", trace, "--format", "html", "-o", str(tmp_path / "missing" / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("warptrace: error: cannot write") and err.count("\n") == 1


def test_export_perfetto(trace, tmp_path, capsys):
    out = tmp_path / "run.json"
    assert main(["export", trace, "--perfetto", str(out)]) == 0
    events = json.loads(out.read_text())["traceEvents"]
    assert any(e["ph"] == "X" and e["name"] == "tape.backward()" for e in events)
    assert re.match(r"warptrace: [\d,]+ trace events written to ", capsys.readouterr().err)


def test_export_needs_a_target(trace, capsys):
    assert main(["export", trace]) == 2
    assert "--perfetto" in capsys.readouterr().err


def test_run_writes_html(tmp_path):
    html = tmp_path / "report.html"
    result = _python(
        "-m", "warptrace", "-o", str(tmp_path / "run.wtrace"), "--html", str(html), str(PROGRAM), cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert f"warptrace: HTML report written to {html}" in result.stderr
    assert "error WT101 overwrite-after-read" in result.stderr
    assert "WT101" in html.read_text()


def test_auto_import_prints_what_a_run_prints(tmp_path):
    script = tmp_path / "sim.py"
    script.write_text("import warptrace.auto  # noqa: F401\n" + PROGRAM.read_text())
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "sim.py").write_text(PROGRAM.read_text().replace("import numpy", "\nimport numpy", 1))
    auto = _python("sim.py", cwd=tmp_path)
    run = _python("-m", "warptrace", "sim.py", cwd=plain)
    assert auto.returncode == run.returncode == 0, auto.stderr + run.stderr

    def findings(stderr: str) -> list[str]:
        return [line for line in stderr.splitlines() if line.startswith(("warptrace:", "error ", "  "))]

    # the same lines (the auto script has one extra import line, so the plain copy has a blank one)
    assert findings(auto.stderr) == findings(run.stderr)
    assert "error WT101 overwrite-after-read" in auto.stderr
    meta = json.loads((tmp_path / "sim.wtrace" / "meta.json").read_text())
    assert meta["complete"] is True and meta["exit_status"] == 0


@pytest.mark.parametrize(
    ("exit_call", "status"), [("sys.exit(3)", 3), ("sys.exit(False)", 0), ("sys.exit(True)", 1)]
)
def test_auto_records_the_exit_status(tmp_path, exit_call, status):
    script = tmp_path / "fails.py"
    script.write_text("import warptrace.auto  # noqa: F401\nimport sys\nimport warp as wp\n"
                      f"wp.config.quiet = True\na = wp.zeros(3, device='cpu')\n{exit_call}\n")  # fmt: skip
    result = _python("fails.py", cwd=tmp_path)
    assert result.returncode == status
    meta = json.loads((tmp_path / "fails.wtrace" / "meta.json").read_text())
    assert meta["exit_status"] == status and type(meta["exit_status"]) is int and meta["complete"] is True


def test_plain_import_patches_nothing(tmp_path):
    code = "import warp as wp\nlaunch = wp.launch\nimport warptrace\nassert wp.launch is launch\nprint('ok')"
    result = _python("-c", code, cwd=tmp_path)
    assert result.stdout.strip() == "ok", result.stderr
    assert not list(tmp_path.iterdir())
