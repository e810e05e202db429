"""Renderers of an analysis :class:`~warptrace.analysis.report.Report`: ``text`` for people,
``json`` for machines. Each module exposes ``render(report) -> str``; none imports Warp."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from warptrace.analysis.report import Report

FORMATS = ("text", "json")


def render(report: Report, format: str = "text") -> str:
    """Render ``report`` in one of :data:`FORMATS`."""
    if format == "text":
        from warptrace.report import text

        return text.render(report)
    if format == "json":
        from warptrace.report import json

        return json.render(report)
    raise ValueError(f"unknown report format {format!r} (use {', '.join(FORMATS)})")
