"""Renderers of an analysis :class:`~warptrace.analysis.report.Report`: ``text`` for people,
``json`` for machines, ``html`` (one self-contained page) and ``sarif`` (code scanning).
:data:`FORMATS` is the registry (the CLI's ``--format`` choices come from it);
:func:`render` is the one entry point. None imports Warp; importing this package does not
import pyarrow or numpy either (``html`` and ``sarif`` load on first use).

Adding a format: a module here exposing ``render(report) -> str`` and one entry in FORMATS.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from warptrace.report import json, text

if TYPE_CHECKING:
    from warptrace.analysis.report import Report


def _html(report: Report) -> str:
    from warptrace.report import html  # lazy: the page's data comes from the numpy model

    return html.render(report)


def _sarif(report: Report) -> str:
    from warptrace.report import sarif  # lazy: rule metadata comes from the rule registry

    return sarif.render(report)


FORMATS: dict[str, Callable[[Report], str]] = {
    "text": text.render,
    "json": json.render,
    "html": _html,
    "sarif": _sarif,
}


def render(report: Report, format: str = "text") -> str:
    """Render ``report`` in one of the :data:`FORMATS`."""
    try:
        renderer = FORMATS[format]
    except KeyError:
        raise ValueError(f"unknown report format {format!r} (use {', '.join(FORMATS)})") from None
    return renderer(report)
