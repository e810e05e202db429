"""Renderers of a :class:`~warptrace.analysis.diff.TraceDiff`: one screen of text, or one JSON object.

Text, for a person checking a fix::

    warptrace diff: train.wtrace → train_fixed.wtrace
    findings: 1 resolved, 0 introduced, 0 unchanged

    resolved  error WT101 overwrite-after-read  train.py:69
      kernel `spring_force` (argument `force`) overwrites `force`, which ...

    what changed:
      buffers distinct  `force`: 1 buffer shared across 4 steps → 4 distinct (`forces`; ...)  [explains WT101]
      and 2 more: 1 × kernel source, 1 × allocations (all in --format json)

The resolved and introduced findings come first, then the changes that explain them,
then a few more, then everything else folded into counts; with value summaries on both
sides, the numbers that changed (loss and first non-finite value first, at most three; the
header counts the others). JSON carries everything::

    {"warptrace_version": "0.1.0", "schema": 1, "before": "...", "after": "...",
     "summary": {"resolved": 1, "introduced": 0, "unchanged": 0, "changes": 3, "new_errors": 0},
     "alignment": {"related": true, "steps_before": ..., "steps_matched": ..., ...},
     "findings": {"resolved": [finding], "introduced": [finding], "unchanged": [finding]},
     "structure": [{"kind", "message", "before": [loc], "after": [loc], "times", "subjects", "explains"}],
     "numbers": [{"name", "before", "after", "message"}],
     "exit_code": 0}

A finding object is the one ``analyze --format json`` prints, taken from the trace it
occurs in (an unchanged finding from AFTER, with ``before_location`` added).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

from warptrace.analysis.findings import Finding
from warptrace.report.json import plain
from warptrace.report.text import INDENT, display_path, file_line

if TYPE_CHECKING:
    from warptrace.analysis.diff import Change, TraceDiff
    from warptrace.analysis.diff.numbers import NumberChange

DIFF_SCHEMA = 1
FORMATS = ("text", "json")
# changes shown one per line after the explaining ones (the rest are counted)
MORE_CHANGES = 4
MAX_NUMBERS = 3  # numbers listed in the text report (all of them are in --format json)


def render(diff: TraceDiff, format: str = "text") -> str:
    if format == "text":
        return render_text(diff)
    if format == "json":
        return json.dumps(to_dict(diff), indent=2, default=plain) + "\n"
    raise ValueError(f"unknown diff format {format!r} (use {', '.join(FORMATS)})")


def to_dict(diff: TraceDiff) -> dict[str, Any]:
    from warptrace import __version__

    unchanged = []
    for pair in diff.unchanged:
        entry = pair.after.to_dict()
        entry["before_location"] = pair.before.to_dict()["location"]
        unchanged.append(entry)
    return {
        "warptrace_version": __version__,
        "schema": DIFF_SCHEMA,
        "before": diff.before_path,
        "after": diff.after_path,
        "summary": {
            "resolved": len(diff.resolved),
            "introduced": len(diff.introduced),
            "unchanged": len(diff.unchanged),
            "changes": len(diff.changes),
            "new_errors": len(diff.new_errors()),
        },
        "alignment": dict(diff.alignment),
        "findings": {
            "resolved": [f.to_dict() for f in diff.resolved],
            "introduced": [f.to_dict() for f in diff.introduced],
            "unchanged": unchanged,
        },
        "structure": [change.to_dict() for change in diff.changes],
        "numbers": [
            {"name": n.name, "before": n.before, "after": n.after, "message": n.message} for n in diff.numbers
        ],
        "exit_code": diff.exit_code(),
    }


def render_text(diff: TraceDiff) -> str:
    cwd = diff.after_meta.get("cwd") or diff.before_meta.get("cwd")
    lines = [
        f"warptrace diff: {display_path(diff.before_path, cwd)} → {display_path(diff.after_path, cwd)}",
        f"findings: {len(diff.resolved)} resolved, {len(diff.introduced)} introduced, "
        f"{len(diff.unchanged)} unchanged",
    ]
    if not diff.related:
        a = diff.alignment
        lines.append(
            f"note: these look like different programs: {a.get('steps_matched', 0)} of "
            f"{max(a.get('steps_before', 0), a.get('steps_after', 0))} steps and {a.get('sites_matched', 0)} of "
            f"{max(a.get('sites_before', 0), a.get('sites_after', 0))} call sites line up; changes are only counted"
        )
    for title, findings, meta in (
        ("resolved", diff.resolved, diff.before_meta),
        ("introduced", diff.introduced, diff.after_meta),
    ):
        for finding in findings:
            lines.append("")
            lines.extend(_finding_lines(title, finding, meta.get("cwd")))
    if diff.unchanged:
        codes = Counter(pair.after.code for pair in diff.unchanged)
        listed = ", ".join(f"{code} ×{n}" if n > 1 else code for code, n in sorted(codes.items()))
        lines.append("")
        lines.append(f"unchanged: {listed}")
    lines.extend(_structure_lines(diff))
    if diff.numbers:
        lines.append("")
        lines.extend(_number_lines(diff.numbers))
    new_errors = diff.new_errors()
    if new_errors:
        lines.append("")
        lines.append(
            f"{len(new_errors)} new error{'s' if len(new_errors) > 1 else ''} in AFTER (exit status 1)"
        )
    return "\n".join(lines) + "\n"


def _finding_lines(title: str, finding: Finding, cwd: str | None) -> list[str]:
    where = file_line(finding.location.file, finding.location.line, cwd)
    count = f" (×{finding.count})" if finding.count > 1 else ""
    return [
        f"{title}  {finding.severity.label} {finding.code} {finding.name}  {where}{count}",
        INDENT + finding.message,
    ]


def _structure_lines(diff: TraceDiff) -> list[str]:
    if not diff.changes:
        return ["", "what changed: nothing in the program's structure"]
    shown: list[Change] = []
    if diff.related:
        shown = [c for c in diff.changes if c.explains]
        shown += [c for c in diff.changes if not c.explains][:MORE_CHANGES]
    lines = ["", "what changed:"]
    for change in shown:
        explains = f"  [explains {', '.join(change.explains)}]" if change.explains else ""
        lines.append(f"{INDENT}{change.kind.replace('_', ' ')}  {change.message}{explains}")
    rest = [c for c in diff.changes if c not in shown]
    if rest:
        counts = Counter(c.kind for c in rest)
        listed = ", ".join(f"{n} × {kind.replace('_', ' ')}" for kind, n in counts.most_common())
        lead = "and " if shown else ""
        lines.append(
            f"{INDENT}{lead}{len(rest)} {'more ' if shown else ''}changes: {listed} (all in --format json)"
        )
    return lines


def _number_lines(numbers: list[NumberChange]) -> list[str]:
    """The numbers that changed, the loss and the first non-finite value first, at most
    :data:`MAX_NUMBERS` (a run with many parameters would fill the screen); the header counts
    what is left out."""
    changed = [n for n in numbers if n.before != n.after]
    first = [n for n in changed if n.name in ("loss", "first non-finite")]
    shown = (first + [n for n in changed if n not in first])[:MAX_NUMBERS]
    unchanged, more = len(numbers) - len(changed), len(changed) - len(shown)
    left = [f"{unchanged} unchanged"] * bool(unchanged) + [f"{more} more changed"] * bool(more)
    header = "numbers:" + (f" ({', '.join(left)}: --format json)" if left else "")
    return [header, *(INDENT + number.message for number in shown)]
