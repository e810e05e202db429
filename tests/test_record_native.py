"""The recorder's compiled modules (``record/native.py``: Cython builds of the wrappers' own
source) against that source.

Where they are built, the recorder runs them unless ``WARPTRACE_PURE_PYTHON=1`` is set;
both must record the same rows. Every zoo program is recorded both ways, each way in a
process of its own, and every table is compared row by row (times and device pointers
aside). The rest of the suite runs with whichever form the environment selects (CI runs
it both ways).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from warptrace.record import native

ROOT = Path(__file__).resolve().parent.parent
_SKIP_COLUMNS = {"t_ns", "ptr"}  # wall-clock times; device addresses differ between processes
needs_compiled = pytest.mark.skipif(
    not native.COMPILED, reason=f"the compiled recorder is not used here: {native.REASON}"
)


def _env(pure: bool) -> dict[str, str]:
    env = dict(os.environ)
    env.pop(native.PURE_PYTHON_ENV, None)
    if pure:
        env[native.PURE_PYTHON_ENV] = "1"
    return env


def test_every_native_module_runs_in_the_form_chosen():
    compiled = [not importlib.import_module(name).__file__.endswith(".py") for name in native.NATIVE_MODULES]
    assert compiled == [native.COMPILED] * len(native.NATIVE_MODULES)
    frames, compiled_here = native.FRAMES, native.COMPILED
    assert frames == int(not compiled_here)
    assert native.summary().startswith("recorder: ")


def test_the_env_var_selects_the_python_source():
    probe = (
        "import importlib; from warptrace.record import native; "
        "print(native.COMPILED, native.FRAMES, all(importlib.import_module(n).__file__.endswith('.py') "
        "for n in native.NATIVE_MODULES))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=_env(pure=True),
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["False", "1", "True"]


def test_a_stale_or_missing_build_runs_the_source(tmp_path, monkeypatch):
    stamp = tmp_path / "stamp.json"
    monkeypatch.delenv(native.PURE_PYTHON_ENV, raising=False)
    monkeypatch.setattr(native, "stamp_path", lambda: str(stamp))
    assert "not built" in native._why_not_compiled()  # no stamp: nothing (or not all) built
    built = native.stamp_of()
    if all(native._compiled_path(name) for name in native.NATIVE_MODULES):
        stamp.write_text(json.dumps({"modules": built}))
        assert native._why_not_compiled() == ""
    name = native.NATIVE_MODULES[0]
    stamp.write_text(json.dumps({"modules": {**built, name: "0" * 64}}))  # a source edited since
    assert native._why_not_compiled() in (
        f"{name} not built",
        f"the build of {name} is older than its source (rebuild: pip install -e .)",
    )


def _record(out: Path, pure: bool, names: list[str]) -> None:
    subprocess.run(
        [sys.executable, "-c", "import sys; from tests.test_record_native import _record_main; "
         "_record_main(sys.argv[1], sys.argv[2:])", str(out), *names],
        cwd=ROOT, env=_env(pure), check=True, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip


def _record_main(out: str, names: list[str]) -> None:
    """(In the child process.) Record the named zoo programs into ``out``, one trace each."""
    import warp as wp

    import warptrace
    from tests.zoo import discover, load

    wp.config.quiet = True
    (Path(out) / "kind").write_text("compiled" if native.COMPILED else "pure")
    for program in discover():
        if program.name not in names or program.skip_reason():
            continue
        flat = program.name.replace("/", "__")
        module = load(program, module_name="zoo_native_" + flat)
        warptrace.start(Path(out) / f"{flat}.wtrace", numerics=program.numerics)
        try:
            module.run()
        finally:
            warptrace.stop()


@needs_compiled
def test_compiled_and_source_record_identical_rows_for_every_zoo_program(tmp_path):
    pytest.importorskip("warp")
    from tests.zoo import discover

    runnable = sorted(p.name for p in discover() if not p.skip_reason())
    pure, compiled = tmp_path / "pure", tmp_path / "compiled"
    pure.mkdir()
    compiled.mkdir()
    _record(pure, True, runnable)
    _record(compiled, False, runnable)
    assert (pure / "kind").read_text() == "pure" and (compiled / "kind").read_text() == "compiled"
    traces = sorted(p.name for p in pure.glob("*.wtrace"))
    assert traces == sorted(p.name for p in compiled.glob("*.wtrace")) and len(traces) == len(runnable)
    for name in traces:
        _assert_same_tables(pure / name, compiled / name)


def _assert_same_tables(pure: Path, compiled: Path) -> None:
    """The two traces hold the same rows in every table (times and device pointers aside)."""
    from warptrace.trace.reader import read_trace

    a, b = read_trace(pure), read_trace(compiled)
    assert sorted(a.tables) == sorted(b.tables)
    assert a.tables["events"].num_rows > 0
    for table in a.tables:
        x, y = a.tables[table], b.tables[table]
        columns = [c for c in x.column_names if c not in _SKIP_COLUMNS]
        rows_a, rows_b = x.select(columns).to_pylist(), y.select(columns).to_pylist()
        first = next((i for i, (r, s) in enumerate(zip(rows_a, rows_b)) if r != s), None)
        shown = slice(first or 0, (first or 0) + 1)
        assert (len(rows_a), first) == (len(rows_b), None), (pure.name, table, rows_a[shown], rows_b[shown])
