"""``--check-numerics``: the summaries table, its costs and guarantees, and the health timeline.

The WT501-WT503 findings themselves are proven by the zoo (programs marked
``# check-numerics``, run by test_zoo_findings / test_zoo_honesty); here: what the
recorder stores, that it changes nothing in the program, that it costs nothing without
the flag, that the trace format stays readable both ways, and what ``show --numerics`` and
the JSON report carry.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import warptrace
from tests.zoo import discover, load
from warptrace.cli import main
from warptrace.errors import TraceError
from warptrace.trace.reader import read_trace

wp = pytest.importorskip("warp")
wp.config.quiet = True

from warptrace.record import install  # noqa: E402  (needs warp)
from warptrace.record.numerics import summarize  # noqa: E402

PROGRAMS = {p.name: p for p in discover()}


@wp.kernel
def _scale(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * 2.0


def _run_program(name: str, path: Path | None, numerics: bool = True) -> dict:
    module = load(PROGRAMS[name], module_name=f"numerics_{name}_{path.stem if path else 'plain'}")
    if path is None:
        return module.run()
    warptrace.start(path, numerics=numerics)
    try:
        return module.run()
    finally:
        warptrace.stop()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("numerics") / "sqrt.wtrace"
    _run_program("wt501_sqrt_zero", path)
    return path


def test_summarize_counts_nonfinite_zeros_and_hashes() -> None:
    arr = wp.array(np.array([0.0, np.nan, 3.0, -4.0, np.inf], dtype=np.float32), dtype=float)
    count, nonfinite, zeros, first_bad, low, high, l2, digest = summarize(arr)
    assert (count, nonfinite, zeros, first_bad) == (5, 2, 1, 1)
    assert (low, high, l2) == (-4.0, 3.0, 5.0)
    same = wp.array(np.array([0.0, np.nan, 3.0, -4.0, np.inf], dtype=np.float32), dtype=float)
    assert summarize(same)[7] == digest
    vectors = wp.zeros(3, dtype=wp.vec3)
    assert summarize(vectors)[:3] == (9, 0, 9)


def test_table_rows_of_a_run(recorded: Path) -> None:
    trace = read_trace(recorded)
    rows = trace.tables["numerics"].to_pylist()
    whats = {row["what"] for row in rows}
    assert {"write", "leaf_grad", "loss"} <= whats
    bad = [row for row in rows if row["nonfinite"]]
    assert bad and bad[0]["what"] == "write" and bad[0]["first_bad"] == 1
    assert trace.meta["counts"]["numerics"] == len(rows)
    assert trace.meta["numerics"] == {"adjoint_checks": []}
    # the summaries read values under the guard: no value_read event beyond the program's own
    kinds = trace.tables["events"].column("kind").to_pylist()
    assert kinds.count("value_read") == 1  # the program's x.grad.numpy()


def test_results_are_bit_identical(tmp_path: Path) -> None:
    for name in ("wt501_sqrt_zero", "wt503_copy_severed", "wt502_assign_adjoint"):
        plain = _run_program(name, None)
        traced = _run_program(name, tmp_path / f"{name}.wtrace")
        assert plain["grad"].tobytes() == traced["grad"].tobytes(), name


def test_without_the_flag_nothing_is_installed_or_stored(tmp_path: Path) -> None:
    path = tmp_path / "plain.wtrace"
    warptrace.start(path)
    try:
        wrappers = [
            p.wrapper.__code__.co_filename for p in install.installed() if hasattr(p.wrapper, "__code__")
        ]
        x = wp.array(np.arange(4, dtype=np.float32), dtype=float)
        y = wp.zeros(4, dtype=float)
        wp.launch(_scale, dim=4, inputs=[x], outputs=[y])
    finally:
        warptrace.stop()
    assert not any(name.endswith("numerics.py") for name in wrappers)
    assert not (path / "numerics").exists()
    trace = read_trace(path)
    assert "numerics" not in trace.tables and "numerics" not in trace.meta
    assert not [f for f in warptrace.analyze(path).findings if f.code.startswith("WT5")]


def test_rerecording_without_the_flag_drops_the_old_table(recorded: Path, tmp_path: Path) -> None:
    path = tmp_path / "again.wtrace"
    shutil.copytree(recorded, path)
    warptrace.start(path)
    warptrace.stop()
    assert not (path / "numerics").exists()
    read_trace(path)


def test_older_schema_versions_stay_readable(recorded: Path, tmp_path: Path) -> None:
    path = tmp_path / "v2.wtrace"
    shutil.copytree(recorded, path)
    shutil.rmtree(path / "numerics")
    meta = json.loads((path / "meta.json").read_text())
    meta["schema_version"] = 2
    del meta["counts"]["numerics"], meta["parts"]["numerics"], meta["numerics"]
    (path / "meta.json").write_text(json.dumps(meta))
    report = warptrace.analyze(path)
    assert not [f for f in report.findings if f.code.startswith("WT5")]
    assert report.health == []


def test_a_missing_numerics_table_is_refused(recorded: Path, tmp_path: Path, capsys) -> None:
    path = tmp_path / "cut.wtrace"
    shutil.copytree(recorded, path)
    shutil.rmtree(path / "numerics")
    with pytest.raises(TraceError, match="numerics: missing"):
        read_trace(path)
    assert main(["analyze", str(path)]) == 2
    assert "numerics: missing" in capsys.readouterr().err


def test_health_timeline_in_json_and_show(recorded: Path, capsys) -> None:
    assert main(["analyze", "--format", "json", str(recorded)]) == 1
    report = json.loads(capsys.readouterr().out)
    (series,) = report["health"]
    assert series["leaves"] == ["p"] and series["backward"]["line"] == 48
    (step,) = series["steps"]
    assert step["loss"] == pytest.approx(10.0) and step["grads"]["p"]["nonfinite"] == 1
    # WT407 reads the same `wp.sqrt` from the source; WT501 proves the NaN from the values
    assert [f["code"] for f in report["findings"]] == ["WT501", "WT407"]
    assert main(["show", "--numerics", str(recorded)]) == 0
    out = capsys.readouterr().out
    assert "gradient health: backward at wt501_sqrt_zero.py:48 (1 step, 1 tape)" in out
    assert "1 nan/inf" in out


def test_show_numerics_of_a_trace_without_summaries(tmp_path: Path, capsys) -> None:
    path = tmp_path / "plain.wtrace"
    warptrace.start(path)
    warptrace.stop()
    assert main(["show", "--numerics", str(path)]) == 0
    assert "record it with --check-numerics" in capsys.readouterr().out


def test_cli_flag_records_summaries(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    script = PROGRAMS["wt501_where_branch"].path
    runner = tmp_path / "main.py"
    runner.write_text(
        f"import sys\nsys.path.insert(0, {str(script.parent)!r})\nimport wt501_where_branch\nwt501_where_branch.run()\n"
    )
    assert main(["--check-numerics", "-q", str(runner)]) == 0
    err = capsys.readouterr().err
    assert "WT501" in err
    assert (tmp_path / "main.wtrace" / "numerics").is_dir()


# a Warp builtin bound to a global name: a Function whose ``func`` is None
_builtin_sin = wp.sin


@wp.func
def _halve(x: float):
    return 0.5 * x


@wp.func_grad(_halve)
def _halve_grad(x: float, adj_ret: float):
    wp.adjoint[x] += 0.5 * adj_ret


@wp.kernel
def _halve_kernel(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = _halve(x[i]) + _builtin_sin(x[i])


def test_custom_adjoints_are_found_next_to_a_builtin_bound_to_a_global_name():
    """A module global that is a Warp builtin (no Python function behind it) must not stop
    the search for the custom adjoints a kernel reaches."""
    from warptrace.record.adjoint_check import _custom_grad_functions

    assert _builtin_sin.func is None
    assert _custom_grad_functions(_halve_kernel) == [_halve]
