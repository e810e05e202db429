"""Native code (``@wp.func_native``): what the recorder cannot see never becomes an error.

``ok_mem_native_ref_store`` stores ``2 * x[i]`` into ``out[i]`` through a ``wp.ref``
parameter. The snippet's signature proves ``x`` is only read; ``out`` may be read and
overwritten by C++ code nobody can inspect from the trace: exactly one ``info`` WT102 at
the launch says so, and nothing else is reported.
"""

from __future__ import annotations

import os

import pytest

from tests.zoo import PROGRAMS, discover, load
from warptrace.analysis.findings import Severity

PROGRAM = next(p for p in discover() if p.name == "ok_mem_native_ref_store")


def _launch_line() -> int:
    lines = (PROGRAMS / "ok_mem_native_ref_store.py").read_text().splitlines()
    return next(n for n, text in enumerate(lines, start=1) if "wp.launch(double_kernel" in text)


def test_native_reference_store_is_info_only(tmp_path):
    if PROGRAM.skip_reason():
        pytest.skip(PROGRAM.skip_reason())
    import warptrace

    module = load(PROGRAM, module_name="zoo_native_unchecked")
    trace_path = tmp_path / "run.wtrace"
    warptrace.start(trace_path)
    try:
        result = module.run()
    finally:
        warptrace.stop()
    assert result["grad"] == pytest.approx(result["expected"])
    findings = warptrace.analyze(trace_path).findings
    where = [(f.code, f.severity, os.path.realpath(f.location.file), f.location.line) for f in findings]
    path = os.path.realpath(PROGRAMS / "ok_mem_native_ref_store.py")
    assert where == [("WT102", Severity.INFO, path, _launch_line())]
    assert "`out`" in findings[0].message and "native code" in findings[0].message
