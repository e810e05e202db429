"""Numbers of a run for ``diff``: loss and gradient norms, when the trace carries them.

Traces recorded with ``--check-numerics`` hold numeric summaries; plain traces hold no
values at all, and ``diff`` then skips this section. The summary format is being
settled (see the numeric-check work); this module is the one place that reads it,
:func:`numeric_summary` accepts:

- a ``numerics`` table in the trace (rows with ``name``, ``kind`` in ``loss`` /
  ``grad``, ``norm``/``value``, ``zero_fraction``, ``nonfinite``), or
- a ``numerics`` object in ``meta.json``:
  ``{"loss": 0.25, "grads": {"w": {"norm": 1.2, "zero_fraction": 0.0}}, "first_nonfinite": null}``.

Plugging the final format in means changing :func:`numeric_summary` only; the
comparison (:func:`compare_numbers`) works on :class:`NumericSummary`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from warptrace.trace.reader import Trace


@dataclass
class GradStats:
    norm: float
    zero_fraction: float | None = None


@dataclass
class NumericSummary:
    loss: float | None = None
    grads: dict[str, GradStats] = field(default_factory=dict)  # parameter name -> stats
    first_nonfinite: str | None = None  # "kernel `k` (argument `x`) at file:line", None when all finite


@dataclass
class NumberChange:
    """One number before and after (``None`` where a run does not have it)."""

    name: str  # "loss", "grad norm of `w`", "zero fraction of `w.grad`", "first non-finite"
    before: Any
    after: Any

    @property
    def message(self) -> str:
        return f"{self.name}: {_fmt(self.before)} → {_fmt(self.after)}"


def numeric_summary(trace: Trace) -> NumericSummary | None:
    """The numeric summary a trace carries, or None (plain traces carry none)."""
    table = trace.tables.get("numerics")
    if table is not None:
        return _from_rows(table.to_pylist())
    raw = trace.meta.get("numerics")
    if isinstance(raw, dict):
        return _from_meta(raw)
    return None


def _from_meta(raw: dict[str, Any]) -> NumericSummary:
    summary = NumericSummary(loss=_float(raw.get("loss")), first_nonfinite=raw.get("first_nonfinite"))
    grads = raw.get("grads")
    if isinstance(grads, dict):
        for name, stats in grads.items():
            if isinstance(stats, dict) and _float(stats.get("norm")) is not None:
                summary.grads[str(name)] = GradStats(
                    norm=float(stats["norm"]), zero_fraction=_float(stats.get("zero_fraction"))
                )
    return summary


def _from_rows(rows: list[dict[str, Any]]) -> NumericSummary:
    summary = NumericSummary()
    for row in rows:
        kind, name = row.get("kind"), str(row.get("name") or "")
        if kind == "loss":
            summary.loss = _float(row.get("value", row.get("norm")))
        elif kind == "grad" and _float(row.get("norm")) is not None:
            summary.grads[name] = GradStats(float(row["norm"]), _float(row.get("zero_fraction")))
        if row.get("nonfinite") and summary.first_nonfinite is None:
            summary.first_nonfinite = str(row["nonfinite"])
    return summary


def compare_numbers(before: NumericSummary | None, after: NumericSummary | None) -> list[NumberChange]:
    """Loss, per-parameter gradient norm and zero fraction, first non-finite: before → after.
    Empty unless both runs carry numbers."""
    if before is None or after is None:
        return []
    changes = []
    if before.loss is not None or after.loss is not None:
        changes.append(NumberChange("loss", before.loss, after.loss))
    for name in sorted(set(before.grads) | set(after.grads)):
        a, b = before.grads.get(name), after.grads.get(name)
        changes.append(NumberChange(f"grad norm of `{name}`", a.norm if a else None, b.norm if b else None))
        if (a and a.zero_fraction is not None) or (b and b.zero_fraction is not None):
            changes.append(
                NumberChange(
                    f"zero fraction of `{name}.grad`",
                    a.zero_fraction if a else None,
                    b.zero_fraction if b else None,
                )
            )
    if before.first_nonfinite or after.first_nonfinite:
        changes.append(NumberChange("first non-finite", before.first_nonfinite, after.first_nonfinite))
    return changes


def _float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def _fmt(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, float):
        return repr(value) if not math.isfinite(value) else f"{value:.6g}"
    return str(value)
