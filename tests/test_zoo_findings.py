"""Every zoo program, recorded for real and analyzed: the findings are exactly its markers.

For each program in ``tests/programs`` (see its README): run it under
``warptrace.trace``, analyze the trace, then

- every ``# expect: CODE`` marker is a finding of that code at that file:line;
- no ``error``/``warning`` finding sits anywhere a marker does not ask for it (a fixed
  twin or a look-alike therefore gets none at all);
- a program marked ``# forbid-info`` gets no ``info`` finding either;
- a ``# allow: CODE`` marker lets a finding of that code sit on its line without requiring it
  (a shape another branch is teaching a rule to see).
"""

from __future__ import annotations

import os

import pytest

from tests.zoo import Program, allowed_locations, discover, expected_locations, recorder_available
from warptrace.analysis.findings import Finding, Severity

PROGRAMS = discover()


def _where(finding: Finding) -> tuple[str, str, int]:
    return (finding.code, os.path.realpath(finding.location.file), finding.location.line)


def _describe(finding: Finding) -> str:
    return f"{finding.severity.label} {finding.code} at {finding.location}: {finding.message}"


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_findings_match_markers(program: Program, zoo_traces):
    missing_recorder = recorder_available()
    if missing_recorder:
        pytest.skip(missing_recorder)
    if program.skip_reason():
        pytest.skip(program.skip_reason())
    import warptrace

    report = warptrace.analyze(zoo_traces(program))

    expected = {(code, os.path.realpath(file), line) for code, file, line in expected_locations(program)}
    allowed = {(code, os.path.realpath(file), line) for code, file, line in allowed_locations(program)}
    found = {_where(f) for f in report.findings}
    missing = sorted(expected - found)
    unexpected = [
        f
        for f in report.findings
        if _where(f) not in expected | allowed and (f.severity >= Severity.WARNING or program.forbid_info)
    ]
    problems = [f"missing {code} at {file}:{line}" for code, file, line in missing]
    problems += ["unexpected " + _describe(f) for f in unexpected]
    if problems:
        listing = "\n".join("  " + _describe(f) for f in report.findings) or "  (none)"
        pytest.fail(f"{program.name}:\n" + "\n".join(problems) + "\nall findings:\n" + listing, pytrace=False)
