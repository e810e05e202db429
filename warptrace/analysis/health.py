"""The gradient health timeline of a ``--check-numerics`` trace (no Warp).

Per ``tape.backward`` call site (a training loop that makes a new tape every step is one
series), per backward call in time order: the loss value and, for each leaf of the tape
whose values reach the loss, the L2 norm of its gradient after the backward (with its
non-finite count and whether it is exactly zero). Vanishing or exploding gradients over
the run show as a trend along a series. ``show --numerics`` prints it; the JSON report
carries it under ``health``.
"""

from __future__ import annotations

from typing import Any

from warptrace.analysis.dataflow import dataflow_of
from warptrace.analysis.model import Model
from warptrace.analysis.numerics import numerics_of
from warptrace.trace import schema as S

__all__ = ["health_timeline"]


def health_timeline(model: Model) -> list[dict[str, Any]]:
    """One series per backward call site: ``{"backward": {file, line, text}, "tapes": [...],
    "leaves": [labels], "steps": [{"step", "seq", "tape", "loss", "grads": {label: {"l2",
    "nonfinite", "zero"}}}]}``; [] for a trace without summaries."""
    table = numerics_of(model)
    if table is None:
        return []
    df = dataflow_of(model)
    series: dict[int, dict[str, Any]] = {}
    names: dict[int, str] = {}
    calls = [call for call in df.backward_calls if table.by_seq.get(call.end_seq)]
    for call, objective in zip(calls, df.objective_events_many(calls)):
        rows = table.by_seq[call.end_seq]
        leaves: set[int] = set()
        for ev in objective:
            leaves |= df.provenance.get(ev, frozenset())
        where = model.location(call.site)
        entry = series.setdefault(
            call.site,
            {
                "backward": {"file": where.file, "line": where.line, "text": where.text},
                "tapes": [],
                "leaves": [],
                "steps": [],
            },
        )
        if call.tape not in entry["tapes"]:
            entry["tapes"].append(call.tape)
        loss = next((row for row in rows if row.what == S.NUM_LOSS), None)
        grads: dict[str, dict[str, Any]] = {}
        for row in rows:
            if row.what != S.NUM_LEAF_GRAD or row.owner < 0:
                continue
            leaf = df.root_array(row.owner)
            if leaves and leaf not in leaves:
                continue
            label = _name(model, names, leaf)
            if label not in entry["leaves"]:
                entry["leaves"].append(label)
            grads[label] = {"l2": row.l2, "nonfinite": row.nonfinite, "zero": row.all_zero}
        entry["steps"].append(
            {
                "step": len(entry["steps"]),
                "seq": call.begin_seq,
                "tape": call.tape,
                "loss": None if loss is None else _plain(loss.value),
                "grads": grads,
            }
        )
    return list(series.values())


def _name(model: Model, names: dict[int, str], leaf: int) -> str:
    """The leaf's label, made unique among the leaves named so far."""
    if leaf not in names:
        label = model.array_label(leaf)
        if label in names.values():
            label = f"{label}#{leaf}"
        names[leaf] = label
    return names[leaf]


def _plain(value: float) -> float | None:
    return None if value != value else float(value)  # NaN -> null in JSON
