"""Numbers of a run for ``diff``: loss and gradient norms, when the trace carries them.

Traces recorded with ``--check-numerics`` hold value summaries (the ``numerics`` table,
schema 3); plain traces hold no values at all, and ``diff`` then skips this section.
This module is the one place ``diff`` reads them: :func:`numeric_summary` takes the
loss and each leaf's gradient (L2 norm, fraction of exact zeros) at the last backward,
and the first write that produced a non-finite value. It also accepts a ready summary
in ``meta.json`` (``{"loss": 0.25, "grads": {"w": {"norm": 1.2, "zero_fraction": 0.0}}}``),
which tests and other producers use. The comparison (:func:`compare_numbers`) works on
:class:`NumericSummary`.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from warptrace.trace import schema as S
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
    if table is not None and table.num_rows:
        return _from_table(trace, table)
    raw = trace.meta.get("numerics")
    if isinstance(raw, dict) and ("loss" in raw or "grads" in raw):
        return _from_meta(raw)
    return None


def _from_table(trace: Trace, table: pa.Table) -> NumericSummary:
    """From the ``numerics`` table (``--check-numerics``): the loss and each leaf's gradient at
    the last backward, and the first write that produced a non-finite value."""
    rows = table.select(
        ["seq", "array_id", "owner", "what", "arg", "count", "nonfinite", "zeros", "min", "l2"]
    )
    rows = rows.sort_by("seq").to_pylist()
    summary = NumericSummary()
    last_grad: dict[int, dict[str, Any]] = {}
    for row in rows:
        if row["what"] == S.NUM_LOSS:
            summary.loss = row["min"] if row["count"] == 1 else row["l2"]
        elif row["what"] == S.NUM_LEAF_GRAD and row["owner"] is not None:
            last_grad[int(row["owner"])] = row
    labels = _labels(trace, set(last_grad) | {int(r["array_id"]) for r in rows if r["nonfinite"]})
    for owner, row in last_grad.items():
        name = labels.get(owner) or f"array#{owner}"
        count = row["count"] or 0
        summary.grads[name] = GradStats(
            norm=float(row["l2"] or 0.0), zero_fraction=(row["zeros"] / count) if count else None
        )
    bad = next((r for r in rows if r["nonfinite"] and r["what"] == S.NUM_WRITE), None)
    if bad is not None:
        name = labels.get(int(bad["array_id"])) or bad["arg"] or f"array#{bad['array_id']}"
        summary.first_nonfinite = f"`{name}` ({bad['nonfinite']} of {bad['count']} values)" + _written_by(
            trace, int(bad["seq"])
        )
    return summary


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


def _labels(trace: Trace, array_ids: set[int]) -> dict[int, str]:
    arrays = trace.tables["arrays"]
    if not array_ids:
        return {}
    picked = arrays.filter(pc.is_in(arrays.column("array_id"), pa.array(sorted(array_ids), pa.int64())))
    return {
        int(a): str(label or "")
        for a, label in zip(picked.column("array_id").to_pylist(), picked.column("label").to_pylist())
    }


def _written_by(trace: Trace, seq: int) -> str:
    """`` by kernel `k` at file.py:12`` for the event ``seq`` (file name only: runs may live apart)."""
    events = trace.tables["events"]
    found = events.filter(pc.equal(events.column("seq"), seq)).to_pylist()
    if not found:
        return ""
    event = found[0]
    kernel = next(
        (k["key"] for k in trace.tables["kernels"].to_pylist() if k["kernel_id"] == event["kernel"]), None
    )
    site = next((r for r in trace.tables["sites"].to_pylist() if r["site_id"] == event["site"]), None)
    where = f" at {os.path.basename(site['file'] or '')}:{site['line']}" if site else ""
    return (f" by kernel `{kernel}`" if kernel else "") + where


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
