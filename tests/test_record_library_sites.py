"""Call sites of programs built on libraries: the user's line, with the library line beside it.

Frames of installed packages (``site-packages``, ``dist-packages``) and of the standard
library are library code: a launch made inside a solver's ``step()`` is sited at the user's
``solver.step(...)`` line, and the ``sites`` row of that line names the library line in
``library_site``. The zoo's ``minisolver`` package lives in a folder named ``site-packages``
for that reason.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

wp = pytest.importorskip("warp")

import warptrace  # noqa: E402
from tests.zoo import PROGRAMS, discover, load  # noqa: E402
from warptrace.record import callsite  # noqa: E402
from warptrace.trace.reader import read_trace  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = PROGRAMS / "site-packages" / "minisolver" / "__init__.py"


def test_frame_kinds_follow_the_file_names():
    kind = callsite.frame_kind
    assert kind(wp.__file__) == callsite.INTERNAL
    assert kind(warptrace.__file__) == callsite.INTERNAL
    assert kind(contextlib.__file__) == callsite.INTERNAL
    assert kind("<frozen runpy>") == callsite.INTERNAL
    assert kind(os.path.join(os.path.dirname(wp.__file__), "examples", "core", "example.py")) == callsite.USER
    assert kind("/opt/env/lib/python3.11/site-packages/newton/solvers.py") == callsite.LIBRARY
    assert kind("/usr/lib/python3/dist-packages/numpy/core/numeric.py") == callsite.LIBRARY
    assert kind(subprocess.__file__) == callsite.LIBRARY  # the standard library
    assert kind(str(LIBRARY)) == callsite.LIBRARY
    assert kind(__file__) == callsite.USER
    assert kind("<stdin>") == callsite.USER
    assert kind("<ipython-input-3-abc>") == callsite.USER


def _trace_of(name: str, tmp_path: Path) -> Path:
    program = next(p for p in discover() if p.name == name)
    module = load(program, module_name="zoo_sites_" + name)
    path = tmp_path / f"{name}.wtrace"
    warptrace.start(path)
    try:
        module.run()
    finally:
        warptrace.stop()
    return path


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_launches_inside_a_library_are_sited_at_the_user_line(tmp_path):
    trace = read_trace(_trace_of("wt101_lib_solver", tmp_path))
    sites = {row["site_id"]: row for row in trace.tables["sites"].to_pylist()}
    program = PROGRAMS / "wt101_lib_solver.py"
    step_line = _line_of(program, "solver.step(states[k]")
    launch_line = _line_of(LIBRARY, "wp.launch(_stiffness")
    events = trace.tables["events"].to_pylist()
    launch_sites = {sites[e["site"]]["line"] for e in events if e["kind"] == "launch" and not e["adjoint"]}
    assert step_line in launch_sites
    stiffness = [
        sites[e["site"]] for e in events if e["kind"] == "launch" and sites[e["site"]]["line"] == step_line
    ]
    inner = {sites[row["library_site"]]["line"] for row in stiffness}
    assert launch_line in inner
    assert all(row["file"] == str(program) for row in stiffness)
    library_row = next(sites[row["library_site"]] for row in stiffness)
    assert library_row["file"] == str(LIBRARY) and library_row["library_site"] == -1
    assert library_row["function"] == "Solver.step"  # qualified: the class owns the buffers

    # the solver's work buffer: made at the user's construction line, named by the library line
    arrays = trace.tables["arrays"].to_pylist()
    work = next(a for a in arrays if a["label"] == "self.work")
    assert sites[work["site"]]["line"] == _line_of(program, "solver = minisolver.Solver(")
    assert sites[sites[work["site"]]["library_site"]]["line"] == _line_of(LIBRARY, "self.work = wp.zeros(")


def _record_in_child(tmp_path: Path, env_extra: dict[str, str]) -> Path:
    env = {**os.environ, **env_extra}
    out = tmp_path / "child.wtrace"
    code = (
        "import sys, warptrace; from tests.zoo import discover, load; "
        "p = next(p for p in discover() if p.name == 'wt101_lib_solver'); m = load(p); "
        "warptrace.start(sys.argv[1]); m.run(); warptrace.stop()"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(out)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=600,
    )
    return out


def test_user_paths_make_an_installed_package_the_users_code(tmp_path):
    # a package being developed inside site-packages: its lines are the user's again
    trace = read_trace(_record_in_child(tmp_path, {callsite.USER_PATHS_ENV: str(LIBRARY.parent)}))
    sites = trace.tables["sites"].to_pylist()
    assert all(row["library_site"] == -1 for row in sites)
    assert any(row["file"] == str(LIBRARY) for row in sites)


def test_library_paths_make_a_folder_library_code(tmp_path):
    # the zoo program's own file named as library code: the user's line is now the `python -c`
    # code that runs it, and the program's lines are library lines beside it
    program = PROGRAMS / "wt101_lib_solver.py"
    trace = read_trace(_record_in_child(tmp_path, {callsite.LIBRARY_PATHS_ENV: str(program)}))
    sites = {row["site_id"]: row for row in trace.tables["sites"].to_pylist()}
    paired = [row for row in sites.values() if row["library_site"] >= 0]
    assert paired and all(row["file"] == "<string>" for row in paired)
    assert str(program) in {sites[row["library_site"]]["file"] for row in paired}
