"""The human report: one block per finding, worst first, paths relative to where the run started.

Example::

    warptrace: 1 error in run.wtrace (Warp 1.19.0)

    error WT101 overwrite-after-read
      kernel `spring_force` (argument `force`) overwrites `force`, which kernel `integrate` ...
      change      train.py:68  wp.launch(spring_force, dim=N, inputs=[states[t], k], outputs=[force])
      read        train.py:69  wp.launch(integrate, dim=N, inputs=[states[t], force], outputs=[...])
      allocation  train.py:62  force = wp.zeros(N, dtype=float, requires_grad=True)
      backward    train.py:71  tape.backward(loss)
      occurred 4 times
      fix: write each step's result to a new array ...
      doc: Warp documentation, Differentiability > Array Overwrites
      more: python -m warptrace explain WT101

A clean trace is one line that does not claim the gradient is right (rules name known
patterns; only a measurement proves a gradient): ``no known gradient bug pattern found
(checked: memory, accumulation, flow); measure the gradient itself: python -m warptrace
gradcheck train.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from warptrace.analysis.command import display_path, gradcheck_command
from warptrace.analysis.findings import Finding, Location, Severity
from warptrace.trace.schedule import describe as describe_recording

if TYPE_CHECKING:
    from warptrace.analysis.report import Report

INDENT = "  "
NOTHING_FOUND = "no known gradient bug pattern found"


def gradcheck_hint(meta: dict) -> str:
    """Where to go when the rules find nothing: the measurement, on the recorded command
    (known only for runs of ``python -m warptrace SCRIPT.py``, which store ``script``)."""
    return f"measure the gradient itself: {gradcheck_command(meta)}"


def file_line(file: str, line: int, cwd: str | None, *, blank_unknown: bool = False) -> str:
    """``file:line`` with ``file`` shown relative to ``cwd`` (see :func:`display_path`);
    "" for an unknown line (0) when ``blank_unknown``."""
    if blank_unknown and not line:
        return ""
    return f"{display_path(file, cwd)}:{line}"


def render(report: Report) -> str:
    cwd = report.meta.get("cwd")
    lines: list[str] = []
    serious = [f for f in report.findings if f.severity >= Severity.WARNING]
    checked = ", ".join(report.families_checked) or "none"
    if not serious:
        lines.append(f"{NOTHING_FOUND} (checked: {checked}); {gradcheck_hint(report.meta)}")
    else:
        lines.append(f"warptrace: {summary(report)} in {display_path(report.trace_path, cwd)}{_warp(report)}")
    if not report.meta.get("complete", False):
        lines.append(
            "note: the trace is incomplete (the run stopped before warptrace finished writing it); "
            "findings cover only what was recorded"
        )
    recorded = describe_recording(report.meta)
    if recorded:
        lines.append(f"note: {recorded}")
    for finding in report.findings:
        lines.append("")
        lines.extend(_finding_lines(finding, cwd))
    if serious and report.families_checked:
        lines.append("")
        lines.append(f"checked: {checked}")
    return "\n".join(lines) + "\n"


def summary(report: Report) -> str:
    """``2 errors, 1 warning``: the findings counted by severity, worst first ("" for none)."""
    counts = []
    for severity in (Severity.ERROR, Severity.WARNING, Severity.INFO):
        n = sum(1 for f in report.findings if f.severity == severity)
        if n:
            counts.append(f"{n} {severity.label}{'s' if n > 1 else ''}")
    return ", ".join(counts)


def _warp(report: Report) -> str:
    version = report.meta.get("warp_version")
    return f" (Warp {version})" if version else ""


def _finding_lines(finding: Finding, cwd: str | None) -> list[str]:
    lines = [f"{finding.severity.label} {finding.code} {finding.name}", INDENT + finding.message]
    located = [("change", finding.location)] + [(loc.role or "related", loc) for loc in finding.related]
    width = max(len(role) for role, _ in located)
    for role, loc in located:
        lines.append(f"{INDENT}{role.ljust(width)}  {_place(loc, cwd)}")
    lines.append(INDENT + ("occurred once" if finding.count == 1 else f"occurred {finding.count} times"))
    if finding.fix:
        lines.append(f"{INDENT}fix: {finding.fix}")
    if finding.doc:
        lines.append(f"{INDENT}doc: Warp documentation, {finding.doc}")
    lines.append(f"{INDENT}more: python -m warptrace explain {finding.code}")
    return lines


def _place(loc: Location, cwd: str | None) -> str:
    where = file_line(loc.file, loc.line, cwd)
    return f"{where}  {loc.text}" if loc.text else where
