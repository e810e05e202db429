"""What the findings say about programs built on libraries, handles and copies.

The zoo test checks codes and lines; these check the words that make a finding actionable:
the library line kept beside the user's, the library object that keeps an overwritten
buffer and its fix, WT310's cause (a copy, a control never passed on, handle queries),
and the severity of an overwrite the value summaries prove harmless today.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("warp")

import warptrace
from tests.zoo import discover, record
from warptrace.analysis.findings import Severity

PROGRAMS = {p.name: p for p in discover()}


def _report(name: str, zoo_traces):
    return warptrace.analyze(zoo_traces(PROGRAMS[name]))


def test_library_overwrite_names_the_object_that_keeps_the_buffer(zoo_traces):
    (finding,) = _report("wt101_lib_solver", zoo_traces).by_code("WT101")
    assert finding.location.file.endswith("wt101_lib_solver.py")
    assert "`self.work` belongs to the library: `Solver` (minisolver) allocated it" in finding.message
    assert "create a fresh `Solver` for each taped step" in finding.fix
    roles = [loc.role for loc in finding.related]
    assert roles[:2] == ["inside", "read"]  # the library launch right after the user line
    inside = finding.related[0]
    assert inside.file.endswith("minisolver/__init__.py") and "wp.launch(_stiffness" in inside.text
    allocation = finding.related[roles.index("allocation")]
    assert "solver = minisolver.Solver(" in allocation.text
    assert "self.work = wp.zeros(" in finding.related[roles.index("allocation") + 1].text


@pytest.mark.parametrize(
    ("name", "words", "not_words"),
    [
        ("wt310_copy_not_view", "`params` is a copy of `x`, not a view", "read on the tape"),
        ("wt310_lib_default_control", "read on the tape by kernel `set_forces`", "copy of"),
        ("wt310_mesh_query", "reaches the loss only through queries of a mesh", "copy of"),
    ],
)
def test_unreached_parameter_says_why(name, words, not_words, zoo_traces):
    report = _report(name, zoo_traces)
    (finding,) = report.by_code("WT310")
    assert finding.severity == Severity.ERROR
    assert words in finding.message and not_words not in finding.message
    assert not report.by_code("WT306")  # the read is not stale: nothing can ever fill it


def test_unchanged_overwrite_is_a_warning_with_value_summaries(tmp_path: Path, zoo_traces):
    program = PROGRAMS["wt101_recompute_unchanged"]
    assert program.numerics
    (proven,) = warptrace.analyze(zoo_traces(program)).by_code("WT101")
    assert proven.severity == Severity.WARNING and "stored the very bytes the reader saw" in proven.message
    program.numerics = False
    try:
        plain = warptrace.analyze(record(program, tmp_path / "plain.wtrace", "zoo_plain_recompute"))
    finally:
        program.numerics = True
    (unproven,) = plain.by_code("WT101")
    assert unproven.severity == Severity.ERROR
