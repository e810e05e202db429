"""The gradient health timeline of a ``--check-numerics`` trace (no Warp).

Per ``tape.backward`` call site (a training loop that makes a new tape every step is one
series), per backward call in time order: the loss value and, for each leaf of the tape
whose values reach the loss, the L2 norm of its gradient after the backward (with its
non-finite count and whether it is exactly zero) and of its values (the parameter norm,
and whether an update changed the values since the previous step). For small leaves, the
step also holds the curvature along the optimizer's path, ``|g_k - g_k-1| / |p_k - p_k-1|``,
and the step size the update took, ``|p_k - p_k-1| / |g_k-1|``. Vanishing or exploding
gradients over the run show as a trend along a series; a series that diverged carries the
:mod:`warptrace.analysis.divergence` verdict under ``divergence``. ``show --numerics``
prints it; the JSON report carries it under ``health``; the HTML report draws it.
"""

from __future__ import annotations

import math
from typing import Any

from warptrace.analysis.dataflow import dataflow_of
from warptrace.analysis.divergence import Divergence, detect
from warptrace.analysis.model import Model
from warptrace.analysis.numerics import Summary, numerics_of, total_norm
from warptrace.trace import schema as S

__all__ = ["divergence_of", "health_timeline"]


def health_timeline(model: Model) -> list[dict[str, Any]]:
    """One series per backward call site: ``{"backward": {file, line, text}, "tapes": [...],
    "leaves": [labels], "steps": [{"step", "seq", "end_seq", "tape", "loss", "loss_nonfinite", "nonfinite",
    "grads": {label: {"l2", "nonfinite", "zero"}}, "params": {label: {"l2", "nonfinite"}},
    "updated", "curvature", "step_size"}], "divergence": {...} (only where it diverged)}``;
    [] for a trace without summaries. Built once per model, with :func:`divergence_of`."""
    if "health" not in model.derived:
        table = numerics_of(model)
        series = _timeline(model)
        found = detect(model, table, series) if table is not None else None
        if found is not None:
            series[found.series]["divergence"] = found.to_dict()
        model.derived["divergence"] = found
        model.derived["health"] = series
    return model.derived["health"]


def divergence_of(model: Model) -> Divergence | None:
    """The run's divergence (:func:`warptrace.analysis.divergence.detect` over the health
    timeline), once per model."""
    health_timeline(model)
    return model.derived["divergence"]


def _timeline(model: Model) -> list[dict[str, Any]]:
    table = numerics_of(model)
    if table is None:
        return []
    df = dataflow_of(model)
    series: dict[int, dict[str, Any]] = {}
    names: dict[int, str] = {}
    last_hash: dict[int, dict[str, str]] = {}  # per series: leaf label -> hash of its values
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
        params: dict[str, dict[str, Any]] = {}
        hashes: dict[str, str] = {}
        changes = [0.0, 0.0, 0]  # sum of |dp|^2, sum of |dg|^2, leaves with both
        kept: set[int] = set()  # the leaves (array ids) of this step
        for row in rows:
            if row.what != S.NUM_LEAF_GRAD or row.owner < 0:
                continue
            leaf = df.root_array(row.owner)
            if leaves and leaf not in leaves:
                continue
            kept.add(row.owner)
            label = _name(model, names, leaf)
            if label not in entry["leaves"]:
                entry["leaves"].append(label)
            grads[label] = {"l2": row.l2, "nonfinite": row.nonfinite, "zero": row.all_zero}
        by_leaf: dict[int, dict[str, Summary]] = {}
        for row in rows:
            leaf_id = row.array_id if row.what in (S.NUM_LEAF, S.NUM_LEAF_CHANGE) else row.owner
            if leaf_id in kept and row.what in (S.NUM_LEAF, S.NUM_LEAF_CHANGE, S.NUM_GRAD_CHANGE):
                by_leaf.setdefault(leaf_id, {})[row.what] = row
        for leaf_id, found in by_leaf.items():
            label = _name(model, names, df.root_array(leaf_id))
            value = found.get(S.NUM_LEAF)
            if value is not None:
                params[label] = {"l2": value.l2, "nonfinite": value.nonfinite}
                hashes[label] = value.hash
            moved, turned = found.get(S.NUM_LEAF_CHANGE), found.get(S.NUM_GRAD_CHANGE)
            if moved is not None and turned is not None and not moved.nonfinite and not turned.nonfinite:
                changes[0] += moved.l2**2
                changes[1] += turned.l2**2
                changes[2] += 1
        previous = entry["steps"][-1] if entry["steps"] else None
        last_hashes = last_hash.get(call.site, {})
        updated = None
        if previous is not None and hashes and last_hashes:
            shared = [label for label in hashes if label in last_hashes]
            updated = any(hashes[label] != last_hashes[label] for label in shared) if shared else None
        last_hash[call.site] = hashes
        curvature = step_size = None
        if changes[2] and changes[0] > 0.0 and len(by_leaf) == changes[2]:
            moved_norm = math.sqrt(changes[0])
            curvature = math.sqrt(changes[1]) / moved_norm
            before = total_norm(previous["grads"]) if previous is not None else None
            step_size = moved_norm / before if before else None
        nonfinite = (loss is not None and loss.nonfinite > 0) or any(
            g["nonfinite"] for g in (*grads.values(), *params.values())
        )
        entry["steps"].append(
            {
                "step": len(entry["steps"]),
                "seq": call.begin_seq,
                "end_seq": call.end_seq,
                "tape": call.tape,
                "loss": None if loss is None else _plain(loss.value),
                "loss_nonfinite": loss is not None and loss.nonfinite > 0,
                "nonfinite": bool(nonfinite),
                "grads": grads,
                "params": params,
                "updated": updated,
                "curvature": curvature,
                "step_size": step_size,
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
