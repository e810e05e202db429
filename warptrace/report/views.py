"""What the HTML report draws, as plain JSON-ready data built from the analysis model.

Pure and bounded: whatever the size of the trace, every view here is a few thousand
values at most, so the report of a 1M-launch run is folded data, not a million DOM
nodes. The browser side (``static/report.js``) only lays these values out.

- :func:`source_windows`: the user's source around a finding, with the overwrite, read,
  allocation and backward lines marked (read from disk at render time; the location's
  recorded text when the file is gone).
- :func:`hazard_view`: for a memory finding, buffers as lanes and the launches of the
  tape as columns up to its backward, reads and writes as marks, repeated steps folded
  into one column with a count.
- :func:`timeline_view`: the whole run binned by event order, one row per tape and one
  for untaped work, with backward calls, ``tape.zero()``/``reset()`` and findings marked.
- :func:`arrays_view`: the array table (labels, kinds, shapes, allocation lines).
- :func:`health_view`: the gradient health timeline of a ``--check-numerics`` run, per
  backward call site the loss, gradient and parameter norms per step (sampled to at most
  :data:`HEALTH_POINTS` steps, the marked ones kept), with where a divergence began.
"""

from __future__ import annotations

import linecache
from collections.abc import Iterable
from typing import Any

import numpy as np

from warptrace.analysis.findings import Finding, Location
from warptrace.analysis.model import K, Model
from warptrace.analysis.numerics import total_norm
from warptrace.report.text import display_path, file_line
from warptrace.trace import schema as S

CONTEXT = 3  # source lines shown around a marked line
MERGE_GAP = 8  # marked lines closer than this share one source window
MAX_COLUMNS = 120  # hazard picture: columns drawn (launches kept + folds)
FOLD_ABOVE = 24  # hazard picture: a tape with more launches than this folds its repeated steps
MAX_LANES = 10  # hazard picture: buffers drawn
TIMELINE_BINS = 400
TIMELINE_TAPE_ROWS = 12  # up to this many tapes get a row each; more share one row
MAX_ARRAY_ROWS = 500
HEALTH_POINTS = 400  # health chart: steps drawn per series
HEALTH_SERIES = 8  # health chart: series drawn

MEMORY_KINDS = (S.LAUNCH, S.CMD_LAUNCH, S.COPY, S.MEMSET, S.NATIVE)


# ------------------------------------------------------------------ source
def source_windows(finding: Finding, cwd: str | None) -> list[dict[str, Any]]:
    """Windows of source lines per file, each marked line carrying the roles found there."""
    located = [finding.location, *finding.related]
    by_file: dict[str, dict[int, list[str]]] = {}
    texts: dict[tuple[str, int], str] = {}
    for index, loc in enumerate(located):
        if loc.line <= 0:
            continue
        role = loc.role or ("change" if index == 0 else "related")
        roles = by_file.setdefault(loc.file, {}).setdefault(loc.line, [])
        if role not in roles:
            roles.append(role)
        texts[(loc.file, loc.line)] = loc.text
    windows = []
    for file, marks in by_file.items():
        lines = _file_lines(file)
        for first, last in _spans(sorted(marks)):
            if lines:
                start = max(1, first - CONTEXT)
                stop = min(len(lines), last + CONTEXT)
                body = [lines[n - 1].rstrip("\n") for n in range(start, stop + 1)]
            else:  # the file is gone: the recorded text of the marked lines only
                start = first
                body = [texts.get((file, n), "") if n in marks else "" for n in range(first, last + 1)]
            windows.append(
                {
                    "file": display_path(file, cwd),
                    "start": start,
                    "lines": body,
                    "marks": {str(n): marks[n] for n in marks if first <= n <= last},
                }
            )
    return windows


def _file_lines(path: str) -> list[str]:
    if not path or path.startswith("<"):
        return []
    return linecache.getlines(path)


def _spans(lines: list[int]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for line in lines:
        if spans and line - spans[-1][1] <= MERGE_GAP:
            spans[-1] = (spans[-1][0], line)
        else:
            spans.append((line, line))
    return spans


def location_dict(loc: Location, cwd: str | None) -> dict[str, Any]:
    return {"file": display_path(loc.file, cwd), "line": loc.line, "role": loc.role, "text": loc.text}


# ------------------------------------------------------------------ hazard picture
def hazard_view(model: Model, finding: Finding) -> dict[str, Any] | None:
    """Lanes x launches around the first read/overwrite pair of a memory finding, or None."""
    evidence = finding.evidence
    reads, writes = evidence.get("read_seqs") or [], evidence.get("write_seqs") or []
    if not reads or not writes:
        return None
    try:
        read_ev, write_ev = model.ev_of_seq(int(reads[0])), model.ev_of_seq(int(writes[0]))
    except KeyError:
        return None
    hazard_allocs = [int(a) for a in evidence.get("alloc_ids") or []]
    tape_id = int(model.tape[read_ev])
    backward_seq = evidence.get("backward_seq")
    if backward_seq is None:  # rules that do not name it: the backward that replays the read
        backward_seq = model.backward_after(tape_id, int(model.seq[read_ev]))
    columns = _tape_columns(model, tape_id, read_ev, write_ev, backward_seq, hazard_allocs)
    if not len(columns):
        return None
    read_col = int(np.searchsorted(columns, read_ev))
    write_col = int(np.searchsorted(columns, write_ev))
    period = _period(_signatures(model, columns))
    keep = _keep_mask(len(columns), read_col, write_col, period)
    drawn, folds = _fold(columns, keep)
    # the buffer of the drawn pair: read by the reader, written by the overwriter
    read_allocs = {
        int(model.acc_alloc[r]) for r in model.accesses_of(read_ev) if model.acc_role[r] & S.ROLE_READ
    }
    written = {
        int(model.acc_alloc[r]) for r in model.accesses_of(write_ev) if model.acc_role[r] & S.ROLE_WRITE
    }
    pair = [a for a in hazard_allocs if a in read_allocs and a in written] or hazard_allocs
    hazard_allocs = pair + [a for a in hazard_allocs if a not in pair]
    lanes = _lanes(model, drawn, hazard_allocs, (read_ev, write_ev))
    lane_of = {alloc: index for index, alloc in enumerate(lanes)}
    cols: list[dict[str, Any]] = []
    for item in _interleave(drawn, folds):
        if item[0] == "fold":
            _, fold_evs = item
            cols.append(_fold_column(model, fold_evs, lane_of, period))
        else:
            cols.append(_event_column(model, item[1], lane_of, read_ev, write_ev, pair, tape_id))
    backward: dict[str, Any] | None = None
    if backward_seq is not None and backward_seq >= 0:
        try:
            bev = model.ev_of_seq(int(backward_seq))
            loc = model.event_location(bev)
            backward = {"line": loc.line, "text": loc.text}
        except KeyError:
            backward = {"line": 0, "text": ""}
    return {
        "lanes": _distinct([_lane_label(model, alloc) for alloc in lanes]),
        "hazard_lanes": [lane_of[a] for a in pair if a in lane_of],
        "columns": cols,
        "backward": backward,
        "period": period,
        "launches": len(columns),
    }


def _tape_columns(
    model: Model, tape_id: int, read_ev: int, write_ev: int, backward_seq: Any, hazard_allocs: list[int]
) -> np.ndarray:
    """Forward memory effects of the tape segment holding the read, up to its backward, plus any
    untaped effect on the hazard buffers in that span (the overwrite of a WT103 is one)."""
    lo_seq = int(model.seq[min(read_ev, write_ev)])
    hi_seq = int(backward_seq) if backward_seq is not None and backward_seq >= 0 else int(model.seq[-1]) + 1
    hi_seq = max(hi_seq, int(model.seq[max(read_ev, write_ev)]) + 1)
    tape = model.tapes.get(tape_id)
    if tape is not None:
        boundaries = [s for s in (*tape.backward_ends, *tape.resets) if s < lo_seq]
        lo_seq = (
            max(boundaries) + 1 if boundaries else int(model.seq[tape.events[0]]) if tape.events else lo_seq
        )
    lo, hi = int(np.searchsorted(model.seq, lo_seq)), int(np.searchsorted(model.seq, hi_seq))
    span = np.arange(lo, hi)
    kinds = np.isin(model.kind[span], [K[k] for k in MEMORY_KINDS])
    forward = kinds & ~model.adjoint[span] & (model.phase[span] == S.FORWARD)
    on_tape = forward & (model.tape[span] == tape_id) & model.recorded[span]
    touches = np.zeros(len(span), dtype=bool)
    if hazard_allocs and len(span):
        rows = np.arange(int(model.acc_start[lo]), int(model.acc_stop[hi - 1]))
        hit = rows[np.isin(model.acc_alloc[rows], hazard_allocs)]
        hit_evs = np.unique(model.acc_ev[hit])
        touches = np.isin(span, hit_evs) & forward
    columns = span[on_tape | touches]
    return np.union1d(columns, np.asarray([read_ev, write_ev], dtype=np.int64))


def _signatures(model: Model, columns: np.ndarray) -> np.ndarray:
    pairs = model.kernel[columns].astype(np.int64) * 64 + model.kind[columns].astype(np.int64)
    pairs = pairs * (1 << 24) + model.site[columns].astype(np.int64)
    return np.unique(pairs, return_inverse=True)[1]


def _period(signatures: np.ndarray) -> int:
    """Length of the repeated step (the smallest shift that maps the launch sequence onto itself
    for at least 90% of it); 0 when nothing repeats."""
    n = len(signatures)
    for period in range(1, min(256, n // 3) + 1):
        if float(np.mean(signatures[period:] == signatures[:-period])) >= 0.9:
            return period
    return 0


def _keep_mask(n: int, read_col: int, write_col: int, period: int) -> np.ndarray:
    """Columns drawn: the first and last few, and the steps around the read and the overwrite;
    everything is drawn when the tape is short and does not repeat."""
    keep = np.zeros(n, dtype=bool)
    if n <= FOLD_ABOVE or (not period and n <= MAX_COLUMNS // 2):
        keep[:] = True
        return keep
    step = period or 4
    keep[: min(n, 3)] = True
    keep[max(0, n - 3) :] = True
    lo, hi = min(read_col, write_col), max(read_col, write_col)
    if hi - lo + 2 * step <= MAX_COLUMNS // 2:
        keep[max(0, lo - step) : min(n, hi + step + 1)] = True
    else:  # far apart: each with a step of context
        for col in (lo, hi):
            keep[max(0, col - step) : min(n, col + step + 1)] = True
    return keep


def _fold(columns: np.ndarray, keep: np.ndarray) -> tuple[list[int], list[tuple[int, np.ndarray]]]:
    """Kept events, and the folded runs as (position before which they go, their events)."""
    drawn = columns[keep].tolist()
    folds: list[tuple[int, np.ndarray]] = []
    change = np.flatnonzero(np.diff(np.concatenate(([1], keep.astype(np.int8), [1]))))
    for start, stop in zip(change[::2], change[1::2]):
        if stop > start:
            folds.append((int(np.count_nonzero(keep[:start])), columns[start:stop]))
    return drawn, folds


def _interleave(drawn: list[int], folds: list[tuple[int, np.ndarray]]) -> Iterable[tuple[str, Any]]:
    fold_at = {position: evs for position, evs in folds}
    for position, ev in enumerate(drawn):
        if position in fold_at:
            yield ("fold", fold_at.pop(position))
        yield ("event", ev)
    for evs in fold_at.values():
        yield ("fold", evs)


def _rows_of(model: Model, evs: np.ndarray) -> np.ndarray:
    starts, stops = model.acc_start[evs], model.acc_stop[evs]
    lengths = stops - starts
    if not len(evs) or not lengths.sum():
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return offsets + np.arange(int(lengths.sum()))


def _lanes(model: Model, drawn: list[int], hazard: list[int], pair: tuple[int, int]) -> list[int]:
    lanes = list(dict.fromkeys(hazard))
    for ev in pair:
        for row in model.accesses_of(ev):
            alloc = int(model.acc_alloc[row])
            if alloc >= 0 and alloc not in lanes:
                lanes.append(alloc)
    rows = _rows_of(model, np.asarray(drawn, dtype=np.int64))
    allocs = model.acc_alloc[rows]
    allocs = allocs[allocs >= 0]
    if len(allocs):
        values, counts = np.unique(allocs, return_counts=True)
        for alloc in values[np.argsort(-counts, kind="stable")].tolist():
            if alloc not in lanes:
                lanes.append(int(alloc))
    return lanes[:MAX_LANES]


def _lane_label(model: Model, alloc: int) -> str:
    labels: list[str] = []
    for info in model.arrays_by_alloc.get(alloc, ()):
        label = model.array_label(info.array_id)
        if label and not label.startswith("array#") and label not in labels:
            labels.append(label)
    if not labels:
        owners = model.arrays_by_alloc.get(alloc, ())
        loc = model.location(model.allocation_site(owners[0].array_id)) if owners else None
        return f"buffer of line {loc.line}" if loc is not None and loc.line else f"buffer #{alloc}"
    return " = ".join(labels[:3]) + (f" (+{len(labels) - 3})" if len(labels) > 3 else "")


def _distinct(labels: list[str]) -> list[str]:
    """Equal labels of different buffers (``state.q`` of each step) get a number."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return out


def _mark(role: int, flags: int) -> str:
    if role == S.ROLE_READWRITE:
        return "rw"
    if role == S.ROLE_WRITE:
        return "a" if flags & S.FLAG_ACCUMULATE else "w"
    if role == S.ROLE_READ:
        return "r"
    return ""


def event_name(model: Model, ev: int) -> str:
    kind = S.EVENT_KINDS[int(model.kind[ev])] if model.kind[ev] >= 0 else "?"
    if kind in (S.LAUNCH, S.CMD_LAUNCH):
        return model.kernel_name(ev)
    return kind


def _event_column(
    model: Model,
    ev: int,
    lane_of: dict[int, int],
    read_ev: int,
    write_ev: int,
    hazard: list[int],
    tape_id: int,
) -> dict[str, Any]:
    marks: dict[int, str] = {}
    for row in model.accesses_of(ev):
        lane = lane_of.get(int(model.acc_alloc[row]))
        mark = _mark(int(model.acc_role[row]), int(model.acc_flags[row]))
        if lane is not None and mark:
            previous = marks.get(lane, "")
            marks[lane] = mark if not previous or previous == mark else "rw"
    hazards = {lane_of[a] for a in hazard if a in lane_of}
    column: dict[str, Any] = {
        "kind": "event",
        "name": event_name(model, ev),
        "line": model.event_location(ev).line,
        "seq": int(model.seq[ev]),
        "taped": bool(model.recorded[ev] and model.tape[ev] == tape_id),  # on the pictured tape
        "marks": [[lane, mark] for lane, mark in sorted(marks.items())],
    }
    if ev == read_ev:
        column["hazard"] = "read"
        column["hazard_lanes"] = sorted(hazards & set(marks))
    if ev == write_ev:
        column["hazard"] = "overwrite" if ev != read_ev else "read+overwrite"
        column["hazard_lanes"] = sorted(hazards & set(marks))
    return column


def _fold_column(model: Model, evs: np.ndarray, lane_of: dict[int, int], period: int) -> dict[str, Any]:
    rows = _rows_of(model, evs)
    touched = sorted({lane_of[a] for a in np.unique(model.acc_alloc[rows]).tolist() if a in lane_of})
    count = len(evs)
    return {
        "kind": "fold",
        "count": count,
        "steps": count // period if period else 0,
        "lanes": touched,
    }


# ------------------------------------------------------------------ timeline
def timeline_view(model: Model, findings: list[Finding]) -> dict[str, Any]:
    """Binned run: per row (tape / untaped) and bin, forward and backward memory effects."""
    n = model.n_events
    bins = max(1, min(TIMELINE_BINS, n))
    bin_of = (np.arange(n, dtype=np.int64) * bins) // max(n, 1)
    # one row per tape while they fit; a run with many tapes (one per iteration) gets one row for all
    tape_order = list(model.tapes) if len(model.tapes) <= TIMELINE_TAPE_ROWS else []
    row_names = [f"tape {tape_id}" for tape_id in tape_order]
    if len(model.tapes) > len(tape_order):
        row_names.append(f"{len(model.tapes):,} tapes")
    row_names.append("untaped")
    row_of_tape = np.full(
        max(int(model.tape.max(initial=-1)) + 2, 1), max(len(row_names) - 2, 0), dtype=np.int64
    )
    for index, tape_id in enumerate(tape_order):
        row_of_tape[tape_id] = index
    memory = np.isin(model.kind, [K[k] for k in MEMORY_KINDS])
    taped = (model.tape >= 0) & (model.recorded | (model.phase == S.BACKWARD))
    rows = np.where(taped, row_of_tape[np.maximum(model.tape, 0)], len(row_names) - 1)
    backward = (model.phase == S.BACKWARD) | model.adjoint
    cells: list[list[list[Any]]] = []
    for row in range(len(row_names)):
        in_row = memory & (rows == row)
        forward_counts = np.bincount(bin_of[in_row & ~backward], minlength=bins)
        backward_counts = np.bincount(bin_of[in_row & backward], minlength=bins)
        row_cells = []
        for b in np.flatnonzero(forward_counts + backward_counts).tolist():
            cell: list[Any] = [b, int(forward_counts[b]), int(backward_counts[b])]
            if n <= bins:  # one event per bin: name it
                cell.append(event_name(model, b))
            row_cells.append(cell)
        cells.append(row_cells)
    marks: list[list[Any]] = []
    for kind, label in (
        (S.BACKWARD_BEGIN, "backward"),
        (S.TAPE_ZERO, "zero"),
        (S.TAPE_RESET, "reset"),
    ):
        evs = np.flatnonzero(model.kind == K[kind])
        if len(evs):
            where, counts = np.unique(bin_of[evs], return_counts=True)
            marks.extend([label, int(x), int(c)] for x, c in zip(where.tolist(), counts.tolist()))
    finding_marks = []
    for index, finding in enumerate(findings):
        seq = finding.evidence.get("first_seq")
        if seq is None:
            continue
        ev = min(int(np.searchsorted(model.seq, int(seq))), max(n - 1, 0))
        finding_marks.append([index, int(bin_of[ev]) if n else 0, finding.severity.label])
    untaped = memory & ~taped
    return {
        "bins": bins,
        "events": n,
        "rows": row_names,
        "cells": cells,
        "marks": marks,
        "findings": finding_marks,
        "untaped_launches": int(np.count_nonzero(untaped & (model.kind == K[S.LAUNCH]))),
    }


# ------------------------------------------------------------------ arrays
def arrays_view(model: Model, cwd: str | None) -> dict[str, Any]:
    """Arrays in creation order (gradient buffers are listed under their owner's label)."""
    infos = sorted(model.arrays.values(), key=lambda info: (info.seq, info.array_id))
    rows = []
    for info in infos[:MAX_ARRAY_ROWS]:
        loc = model.location(model.allocation_site(info.array_id))
        rows.append(
            [
                model.array_label(info.array_id),
                info.kind,
                "x".join(str(n) for n in info.shape) or "scalar",
                info.dtype,
                bool(info.requires_grad or info.array_id in model.grad_of_owner),
                file_line(loc.file, loc.line, cwd, blank_unknown=True),
                loc.text,
            ]
        )
    return {"rows": rows, "total": len(infos)}


# ------------------------------------------------------------------ health
def health_view(series: list[dict[str, Any]], cwd: str | None) -> list[dict[str, Any]]:
    """Per backward call site: the steps drawn and, per step, the loss and the total gradient
    and parameter norms (null where non-finite or absent), with the divergence marks."""
    views = []
    for entry in series[:HEALTH_SERIES]:
        steps = entry["steps"]
        diverged = entry.get("divergence")
        marked = set()
        if diverged:
            marked = {
                int(diverged["start_step"]),
                int(diverged["last_finite_step"]),
                int(diverged["nonfinite_step"]),
            }
        stride = max(1, -(-len(steps) // HEALTH_POINTS))
        drawn = sorted({i for i in range(0, len(steps), stride)} | {len(steps) - 1} | marked)
        where = entry["backward"]
        views.append(
            {
                "backward": file_line(where["file"], where["line"], cwd),
                "steps": len(steps),
                "x": [steps[i]["step"] for i in drawn],
                "loss": [_positive(steps[i]["loss"]) for i in drawn],
                "grad": [total_norm(steps[i]["grads"]) for i in drawn],
                "param": [total_norm(steps[i].get("params", {})) for i in drawn],
                "nonfinite": [bool(steps[i]["nonfinite"]) for i in drawn],
                "divergence": diverged,
            }
        )
    return views


def _positive(value: float | None) -> float | None:
    return float(abs(value)) if value is not None and np.isfinite(value) else None
