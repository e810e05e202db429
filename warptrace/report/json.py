"""The machine report: one JSON object, stable keys, versioned by ``schema``.

::

    {
      "warptrace_version": "0.1.0",      # the warptrace that analyzed the trace
      "schema": 1,                       # this report format; bumped on incompatible change
      "trace": "run.wtrace",             # trace directory as given to the analyzer
      "complete": true,                  # false: the run stopped before the trace was closed
      "warp_version": "1.19.0",          # Warp version recorded in the trace ("" if unknown)
      "cwd": "/home/me/project",         # directory the run started in (paths below are absolute)
      "families_checked": ["memory", ...],
      "counts": {"events": ..., "launches": ..., ...},   # what the trace held
      "summary": {"error": 1, "warning": 0, "info": 0},
      "findings": [                      # worst first, then by first occurrence
        {"code": "WT101", "name": "overwrite-after-read", "severity": "error",
         "message": "...", "location": {"file", "line", "role", "text", "function"},
         "related": [{...same keys...}], "count": 4, "fix": "...", "doc": "...",
         "evidence": {"first_seq": 12, ...}}    # seqs / array ids / alloc ids that prove it
      ],
      "health": [                        # only in --check-numerics traces with a backward:
        {"backward": {"file", "line", "text"},   # one series per tape.backward call site
         "tapes": [0, 1, ...], "leaves": ["w", "b"],
         "steps": [{"step": 0, "seq": 41, "tape": 0, "loss": 0.53,   # null when non-finite
                    "grads": {"w": {"l2": 1.2, "nonfinite": 0, "zero": false}, ...}}]}
      ]
    }

Keys are only ever added within one ``schema`` number.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from warptrace.analysis.findings import Severity

if TYPE_CHECKING:
    from warptrace.analysis.report import Report

REPORT_SCHEMA = 1


def to_dict(report: Report) -> dict[str, Any]:
    from warptrace import __version__

    summary = {severity.label: 0 for severity in (Severity.ERROR, Severity.WARNING, Severity.INFO)}
    for finding in report.findings:
        summary[finding.severity.label] += 1
    return {
        "warptrace_version": __version__,
        "schema": REPORT_SCHEMA,
        "trace": report.trace_path,
        "complete": bool(report.meta.get("complete", False)),
        "warp_version": str(report.meta.get("warp_version") or ""),
        "cwd": str(report.meta.get("cwd") or ""),
        "families_checked": list(report.families_checked),
        "counts": dict(report.counts),
        "summary": summary,
        "findings": [finding.to_dict() for finding in report.findings],
        **({"health": list(report.health)} if report.health else {}),
        # a recording schedule: the recorded windows of steps (meta.json "recording")
        **({"recording": report.meta["recording"]} if isinstance(report.meta.get("recording"), dict) else {}),
    }


def render(report: Report) -> str:
    return json.dumps(to_dict(report), indent=2, default=plain) + "\n"


def plain(value: Any) -> Any:
    """numpy scalars, sets and tuples in evidence become plain JSON values."""
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, frozenset, tuple)):
        return sorted(value) if isinstance(value, (set, frozenset)) else list(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
