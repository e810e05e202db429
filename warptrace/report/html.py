"""The HTML report: one self-contained file that opens from disk, with no network access.

The page is ``static/report.html`` with ``report.css`` and ``report.js`` inlined and the
report's data embedded as one JSON block; the script lays the data out (findings with
their source in context, hazard pictures, the run's timeline, the array table, filters
by severity and rule). A Content-Security-Policy forbids every fetch, so the file works
offline and leaks nothing when opened.

Size is bounded by :mod:`warptrace.report.views`, which folds repeated steps and bins the
timeline: the report of a 1M-launch run is about as large as that of a small one. Each
finding links to its rule's page on the documentation site (a link, never a fetch).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import TYPE_CHECKING, Any

from warptrace.analysis.model import Model
from warptrace.analysis.report import build_model
from warptrace.analysis.ruledocs import rule_url
from warptrace.analysis.rules import RULE_INFO
from warptrace.errors import WarptraceError
from warptrace.report import views
from warptrace.report.text import summary
from warptrace.trace.reader import read_trace

if TYPE_CHECKING:
    from warptrace.analysis.report import Report

HAZARD_CODES = ("WT101", "WT102", "WT103", "WT104")


def render(report: Report) -> str:
    """The whole HTML document of ``report``."""
    data = report_data(report, _model_of(report))
    page = _static("report.html")
    payload = json.dumps(data, separators=(",", ":"), default=_plain)
    # Inside <script> no "</script" may close the element and no "<!--" open a comment: "<"
    # only ever occurs inside JSON strings, where \u003c is the same character.
    payload = payload.replace("<", "\\u003c")
    title = f"warptrace report: {_summary(report)}"
    return (
        page.replace("{{TITLE}}", _escape(title))
        .replace("/*{{CSS}}*/", _static("report.css"))
        .replace("/*{{JS}}*/", _static("report.js"))
        .replace("{{DATA}}", payload)
    )


def report_data(report: Report, model: Model | None) -> dict[str, Any]:
    """Everything the page draws, as JSON-ready values."""
    from warptrace import __version__

    cwd = report.meta.get("cwd")
    findings = []
    for index, finding in enumerate(report.findings):
        item: dict[str, Any] = {
            "id": index,
            "code": finding.code,
            "name": finding.name,
            "severity": finding.severity.label,
            "message": finding.message,
            "count": finding.count,
            "fix": finding.fix,
            "doc": finding.doc,
            "help_url": rule_url(finding.code) if finding.code in RULE_INFO else "",
            "location": views.location_dict(finding.location, cwd),
            "related": [views.location_dict(loc, cwd) for loc in finding.related],
            "source": views.source_windows(finding, cwd),
        }
        if model is not None and finding.code in HAZARD_CODES:
            item["hazard"] = views.hazard_view(model, finding)
        findings.append(item)
    meta = report.meta
    return {
        "version": __version__,
        "trace": report.trace_path,
        "argv": list(meta.get("argv") or []),
        "warp_version": str(meta.get("warp_version") or ""),
        "start_time": str(meta.get("start_time") or ""),
        "end_time": str(meta.get("end_time") or ""),
        "exit_status": meta.get("exit_status"),
        "complete": bool(meta.get("complete", False)),
        "families_checked": list(report.families_checked),
        "counts": dict(report.counts),
        "summary": _summary(report),
        "findings": findings,
        "timeline": views.timeline_view(model, report.findings) if model is not None else None,
        "arrays": views.arrays_view(model, cwd) if model is not None else None,
        "health": views.health_view(list(report.health), cwd) if report.health else None,
    }


def _model_of(report: Report) -> Model | None:
    """The model the analysis built, else rebuilt from the trace on disk (None if it is gone)."""
    if report.model is not None:
        return report.model
    try:
        return build_model(read_trace(report.trace_path))
    except (WarptraceError, OSError):
        return None


def _summary(report: Report) -> str:
    return summary(report) or "no findings"


def _static(name: str) -> str:
    return resources.files("warptrace.report").joinpath("static", name).read_text(encoding="utf-8")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
