"""Record zoo programs once for report tests: ``record(name, folder) -> (Report, trace path)``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.zoo import discover, load

ROOT = Path(__file__).resolve().parent.parent


def recorder_missing() -> str | None:
    try:
        import warp  # noqa: F401

        from warptrace.record import recorder  # noqa: F401
    except ImportError as exc:
        return f"recording needs warp and warptrace.record ({exc})"
    return None


def record(name: str, folder: Path, numerics: bool = False) -> tuple[Any, str]:
    """Run zoo program ``name`` under the recorder (cwd = repository root, value summaries
    with ``numerics``) and analyze it."""
    missing = recorder_missing()
    if missing:
        pytest.skip(missing)
    import warptrace

    program = {p.name: p for p in discover()}[name]
    trace_path = folder / "run.wtrace"
    old_cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        module = load(program, module_name="zoo_report_" + name)
        warptrace.start(trace_path, numerics=numerics)
        try:
            module.run()
        finally:
            warptrace.stop()
    finally:
        os.chdir(old_cwd)
    return warptrace.analyze(trace_path), str(trace_path)
