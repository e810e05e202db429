"""Newton's SolverFeatherstone in differentiable use, recorded and analyzed (skipped where
Newton is not installed; the programs are in tests/newton_programs).

Featherstone's kernels walk articulation trees: one thread reads the parent's entry of an
array and writes the child's (``body_q``, ``body_v_s``, ...), which is not an in-place
overwrite of a value some adjoint still needs. WT102 reasons per element: those are at most
info. What it proves is an error: ``eval_rigid_tau`` reads ``body_f_ext[child]`` and stores
the converted wrench into the same element, so the adjoint re-reads the converted value.
That is a real bug of Newton 1.8: the gradient is wrong as soon as a body carries an
external wrench (measured by the second test), and right only by luck (zero wrenches) in the
first."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from warptrace.analysis.findings import Severity

pytest.importorskip("newton")

PROGRAM = Path(__file__).parent / "newton_programs" / "featherstone_pendulum.py"
TREE_WALKS = ("eval_rigid_fk", "eval_rigid_id", "eval_articulation_fk_with_velocity_conversion")


def _record(tmp_path, **options):
    import warptrace

    spec = importlib.util.spec_from_file_location("newton_featherstone_pendulum", PROGRAM)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    trace = tmp_path / "run.wtrace"
    warptrace.start(trace)
    try:
        result = module.run(**options)
    finally:
        warptrace.stop()
    return warptrace.analyze(trace), result, module


def _wt102(report):
    return [f for f in report.findings if f.code == "WT102"]


def test_featherstone_tree_walks_are_not_in_place_errors(tmp_path):
    report, result, _ = _record(tmp_path)
    assert np.allclose(result["grad"], result["expected"], rtol=2e-2, atol=1e-4)
    findings = _wt102(report)
    errors = [f for f in findings if f.severity >= Severity.WARNING]
    # the one proven in-place update: eval_rigid_tau's body_f_ext (zero wrenches here)
    assert len(errors) == 1
    assert "`eval_rigid_tau`" in errors[0].message and "body_f_ext" in errors[0].message
    # the tree walks are infos at most (the report keeps only the error on the user's
    # `solver.step(...)` line where they all land: an info there adds nothing)
    for kernel in TREE_WALKS:
        assert not [f for f in findings if f"`{kernel}`" in f.message and f.severity >= Severity.WARNING], (
            kernel
        )
    # dense_cholesky / dense_solve have custom adjoints that read what the call leaves
    assert not [f for f in findings if "eval_dense_" in f.message]
    # the solver refreshes its input state's poses (read and overwrite both inside Newton, on a
    # state it returned): no line of the program changes that, so no error
    assert not [f for f in report.findings if f.code == "WT101" and f.severity == Severity.ERROR]


def test_featherstone_with_external_wrenches_gets_a_wrong_gradient(tmp_path):
    module = _load_only()
    report, result, _ = _record(tmp_path, steps=20, force=module.PUSH)
    assert not np.allclose(result["grad"], result["expected"], rtol=2e-2, atol=1e-4)
    errors = [f for f in _wt102(report) if f.severity == Severity.ERROR]
    assert [("eval_rigid_tau" in f.message, "body_f_ext" in f.message) for f in errors] == [(True, True)]


def _load_only():
    spec = importlib.util.spec_from_file_location("newton_featherstone_pendulum_push", PROGRAM)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
