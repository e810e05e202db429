"""``warptrace show``: a readable summary of a trace, computed from its tables alone.

This is what a user reads before (or instead of) the findings: did the recorder see my
tapes, which launches landed on which tape, which arrays do they read and write, which
Python objects share memory. It uses pyarrow and the trace schema only (no Warp, no
analyzer), so it works on any machine and on a trace the analyzer cannot handle yet.

Long runs are folded: a training loop records thousands of launches, so each section
shows its first events and a count of the rest; ``render(show_all=True)`` shows all.
"""

from __future__ import annotations

import os
import shlex
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from warptrace.report.counts import format_counts, has_activity
from warptrace.trace.reader import Trace
from warptrace.trace.schedule import describe as describe_recording
from warptrace.trace.schema import (
    BACKWARD,
    BACKWARD_BEGIN,
    BACKWARD_END,
    CMD_LAUNCH,
    COPY,
    FLAG_ACCUMULATE,
    FORWARD,
    LAUNCH,
    MEMSET,
    NATIVE,
    RECORD_FUNC,
    ROLE_READ,
    ROLE_READWRITE,
    ROLE_WRITE,
    SET_GRAD,
    SET_REQUIRES_GRAD,
    SET_RETAIN_GRAD,
    TAPE_CREATE,
    TAPE_RESET,
    TAPE_ZERO,
)

# Keys of the activity counts, in display order, with their singular/plural nouns. The
# recorder's ``last_summary`` uses the same keys, so the CLI prints either with one function.

# Events that change memory or gradient semantics: one line each in a tape section.
_LINE_KINDS = frozenset(
    {LAUNCH, CMD_LAUNCH, COPY, MEMSET, NATIVE, TAPE_ZERO, TAPE_RESET, RECORD_FUNC}
    | {SET_REQUIRES_GRAD, SET_RETAIN_GRAD, SET_GRAD}
)


@dataclass(frozen=True)
class Limits:
    """How much of a long trace to print before folding the rest into a count."""

    events: int | None = 20  # lines per tape section (and for the untaped section)
    tapes: int | None = 10
    arrays: int | None = 50


UNLIMITED = Limits(events=None, tapes=None, arrays=None)


# ------------------------------------------------------------------------- counts


def activity_counts(trace: Trace) -> dict[str, int]:
    """Tapes, launches, copies, memsets, backward calls and arrays in the trace (COUNT_NOUNS keys)."""
    events = trace.tables["events"]
    kind = events.column("kind")
    recorded = pc.fill_null(events.column("recorded"), False)
    adjoint = pc.fill_null(events.column("adjoint"), False)
    forward = pc.equal(events.column("phase"), FORWARD)
    is_launch = pc.equal(kind, LAUNCH)
    any_launch = pc.or_(is_launch, pc.equal(kind, CMD_LAUNCH))
    tape_ids = pc.unique(pc.filter(events.column("tape"), pc.greater_equal(events.column("tape"), 0)))
    return {
        "tapes": len(tape_ids),
        "recorded_launches": _count(pc.and_(pc.and_(is_launch, recorded), pc.invert(adjoint))),
        "untaped_launches": _count(
            pc.and_(pc.and_(any_launch, pc.invert(recorded)), pc.and_(pc.invert(adjoint), forward))
        ),
        "copies": _count(pc.and_(pc.equal(kind, COPY), pc.equal(events.column("parent"), -1))),
        "memsets": _count(pc.equal(kind, MEMSET)),
        "backward_calls": _count(pc.equal(kind, BACKWARD_BEGIN)),
        "arrays": trace.tables["arrays"].num_rows,
    }


def _count(mask: Any) -> int:
    return int(pc.sum(pc.cast(pc.fill_null(mask, False), pa.int64())).as_py() or 0)


# ------------------------------------------------------------------------- names


class _Names:
    """Human names for arrays, kernels and sites, resolved once per render."""

    def __init__(self, trace: Trace) -> None:
        arrays = trace.tables["arrays"]
        ids = arrays.column("array_id").to_pylist()
        self.label = dict(zip(ids, arrays.column("label").to_pylist()))
        self.grad_of = dict(zip(ids, arrays.column("grad_of").to_pylist()))
        self.first_arg = _first_args(trace.tables["accesses"])
        kernels = trace.tables["kernels"]
        self.kernel = dict(zip(kernels.column("kernel_id").to_pylist(), kernels.column("key").to_pylist()))
        sites = trace.tables["sites"]
        self.site_file = dict(zip(sites.column("site_id").to_pylist(), sites.column("file").to_pylist()))
        self.site_line = dict(zip(sites.column("site_id").to_pylist(), sites.column("line").to_pylist()))
        cwd = trace.meta.get("cwd")
        self.cwd = cwd if isinstance(cwd, str) and cwd else None

    def array(self, array_id: int, arg: str | None = None, depth: int = 0) -> str:
        """The call-site label; else ``<owner>.grad``; else ``<arg name>#<array_id>``."""
        label = self.label.get(array_id)
        if label:
            return label
        owner = self.grad_of.get(array_id, -1)
        if owner is not None and owner >= 0 and owner != array_id and depth < 4:
            return self.array(owner, depth=depth + 1) + ".grad"
        name = arg or self.first_arg.get(array_id) or "array"
        return f"{name}#{array_id}"

    def site(self, site_id: int | None) -> str:
        if site_id is None or site_id not in self.site_file:
            return "?"
        file = self.site_file[site_id] or "?"
        if self.cwd and file.startswith(self.cwd + os.sep):
            file = file[len(self.cwd) + 1 :]
        return f"{file}:{self.site_line[site_id]}"

    def kernel_name(self, kernel_id: int | None) -> str:
        return (self.kernel.get(kernel_id) if kernel_id is not None else None) or "?"


def _first_args(accesses: pa.Table) -> dict[int, str]:
    """The argument name each array was first passed as: the fallback label of unlabeled arrays."""
    if accesses.num_rows == 0:
        return {}
    ids = accesses.column("array_id").to_numpy()
    unique_ids, first_rows = np.unique(ids, return_index=True)
    args = accesses.column("arg").take(pa.array(first_rows)).to_pylist()
    return {int(array_id): arg for array_id, arg in zip(unique_ids, args) if arg}


# ------------------------------------------------------------------------ render


def render(trace: Trace, *, show_all: bool = False, limits: Limits | None = None) -> str:
    """The whole summary as text: header, one section per tape, untaped events, arrays."""
    limits = UNLIMITED if show_all else (limits or Limits())
    names = _Names(trace)
    events = trace.tables["events"].sort_by("seq")
    accesses = trace.tables["accesses"]
    lines: list[str] = []
    counts = activity_counts(trace)
    lines += _header(trace, counts)
    if not has_activity(counts):
        lines.append("")
        lines.append("No Warp activity was recorded: no launches, copies, memsets, tapes or arrays.")
        return "\n".join(lines) + "\n"

    rows = _rows(events)
    backward_counts = _backward_windows(rows)
    by_tape: dict[int, list[int]] = defaultdict(list)
    for index, tape in enumerate(rows["tape"]):
        if tape is not None and tape >= 0:
            by_tape[tape].append(index)
    tape_ids = sorted(by_tape)
    shown_tapes = tape_ids if limits.tapes is None else tape_ids[: limits.tapes]
    for tape in shown_tapes:
        lines.append("")
        lines += _tape_section(tape, by_tape[tape], rows, backward_counts, accesses, names, limits)
    if len(shown_tapes) < len(tape_ids):
        lines.append("")
        lines.append(f"... {len(tape_ids) - len(shown_tapes)} more tapes (show everything with --all)")

    untaped = [
        index
        for index, tape in enumerate(rows["tape"])
        if (tape is None or tape < 0)
        and rows["phase"][index] != BACKWARD
        and rows["kind"][index] in _LINE_KINDS
    ]
    if untaped:
        lines.append("")
        lines.append(
            f"outside any tape: {len(untaped)} event{'' if len(untaped) == 1 else 's'} "
            "(no gradient flows back through them)"
        )
        lines += _event_lines(untaped, rows, accesses, names, limits, mark_unrecorded=False)

    lines.append("")
    lines += _arrays_section(trace.tables["arrays"], names, limits, _final_flags(rows))
    return "\n".join(lines) + "\n"


def _final_flags(rows: Mapping[str, list[Any]]) -> dict[tuple[int, str], bool]:
    """(array_id, "requires_grad" | "retain_grad") -> the flag's last value set during the run.

    An array's ``arrays`` row holds the flags at its registration: ``wp.array(data,
    requires_grad=True)`` is registered by the copy of its data, before Warp sets the flag,
    and a flag the program sets later is an event of its own."""
    final: dict[tuple[int, str], bool] = {}
    for kind, array_id, value in zip(rows["kind"], rows["array_id"], rows["value"]):
        if kind in (SET_REQUIRES_GRAD, SET_RETAIN_GRAD) and array_id is not None and array_id >= 0:
            attribute = "requires_grad" if kind == SET_REQUIRES_GRAD else "retain_grad"
            final[(array_id, attribute)] = bool(value)
    return final


def _header(trace: Trace, counts: Mapping[str, int]) -> list[str]:
    meta = trace.meta
    argv = meta.get("argv")
    command = shlex.join(str(word) for word in argv) if isinstance(argv, list) else str(argv or "?")
    if trace.complete:
        exit_status = meta.get("exit_status")
        status = f"complete, exit status {'unknown' if exit_status is None else exit_status}"
    else:
        status = "incomplete: readable up to the last flush (the run was killed, or is still running)"
    versions = ", ".join(
        f"{name} {meta[key]}"
        for name, key in (
            ("warp", "warp_version"),
            ("python", "python_version"),
            ("warptrace", "warptrace_version"),
        )
        if meta.get(key)
    )
    lines = [
        f"trace     {trace.path}",
        f"command   {command}",
        f"status    {status}",
    ]
    if meta.get("error"):
        lines.append(f"error     {meta['error']}")
    if versions:
        lines.append(f"versions  {versions}")
    if meta.get("start_time"):
        lines.append(f"time      {meta['start_time']} .. {meta.get('end_time') or '?'}")
    activity = format_counts(counts) if has_activity(counts) else "none"
    lines.append(f"activity  {activity}")
    recorded = describe_recording(meta)
    if recorded:
        lines.append(f"steps     {recorded}")
    return lines


_ROW_COLUMNS = ("seq", "kind", "tape", "recorded", "phase", "adjoint", "site", "kernel", "array_id", "value")


def _rows(events: pa.Table) -> dict[str, list[Any]]:
    return {name: events.column(name).to_pylist() for name in _ROW_COLUMNS}


def _backward_windows(rows: Mapping[str, list[Any]]) -> dict[int, dict[str, int]]:
    """For each BACKWARD_BEGIN row index: what happened until its BACKWARD_END, by kind.

    Counted by position (seq order) rather than by tape column, so the count does not
    depend on which tape id the recorder gives adjoint launches. A backward run inside
    another (a ``record_func`` whose backward calls ``tape.backward()``) counts its own
    events; the outer one's go on after it ends."""
    windows: dict[int, dict[str, int]] = {}
    open_indexes: list[int] = []
    for index, kind in enumerate(rows["kind"]):
        if kind == BACKWARD_BEGIN:
            open_indexes.append(index)
            windows[index] = defaultdict(int)
        elif kind == BACKWARD_END:
            if open_indexes:
                open_indexes.pop()
        elif open_indexes and kind in (LAUNCH, COPY, MEMSET, NATIVE):
            windows[open_indexes[-1]][kind] += 1
    return windows


def _tape_section(
    tape: int,
    tape_rows: list[int],
    rows: Mapping[str, list[Any]],
    backward_counts: Mapping[int, Mapping[str, int]],
    accesses: pa.Table,
    names: _Names,
    limits: Limits,
) -> list[str]:
    indexes = []
    created = None
    recorded = untaped = backward = 0
    for index in tape_rows:
        kind = rows["kind"][index]
        if kind == TAPE_CREATE:
            created = rows["site"][index]
        elif kind == BACKWARD_BEGIN:
            indexes.append(index)
            backward += 1
        elif kind in _LINE_KINDS and rows["phase"][index] != BACKWARD:
            indexes.append(index)
            if kind in (LAUNCH, CMD_LAUNCH):
                if rows["recorded"][index]:
                    recorded += 1
                else:
                    untaped += 1
    where = f" (created at {names.site(created)})" if created is not None else ""
    facts = [f"{recorded} recorded launch{'es' if recorded != 1 else ''}"]
    if untaped:
        facts.append(f"{untaped} launch{'es' if untaped != 1 else ''} not recorded")
    facts.append(f"{backward} backward call{'s' if backward != 1 else ''}")
    lines = [f"tape {tape}{where}: {', '.join(facts)}"]
    lines += _event_lines(
        indexes, rows, accesses, names, limits, mark_unrecorded=True, backward=backward_counts
    )
    return lines


def _event_lines(
    indexes: list[int],
    rows: Mapping[str, list[Any]],
    accesses: pa.Table,
    names: _Names,
    limits: Limits,
    *,
    mark_unrecorded: bool,
    backward: Mapping[int, Mapping[str, int]] | None = None,
) -> list[str]:
    shown = indexes if limits.events is None else indexes[: limits.events]
    flows = _flows([rows["seq"][index] for index in shown], accesses, names)
    table = []
    for index in shown:
        seq = rows["seq"][index]
        kind = rows["kind"][index]
        if kind == BACKWARD_BEGIN:
            loss = rows["array_id"][index]
            what = (
                f"backward(loss={names.array(loss)})"
                if loss is not None and loss >= 0
                else "backward(grads=...)"
            )
            flow = _backward_flow((backward or {}).get(index, {}))
        else:
            what = _describe(kind, index, rows, names)
            flow = flows.get(seq, "")
            if mark_unrecorded and kind in (LAUNCH, CMD_LAUNCH, COPY, MEMSET) and not rows["recorded"][index]:
                what += " (not recorded)"
        table.append((str(seq), what, names.site(rows["site"][index]), flow))
    lines = _columns(table, indent="  ")
    if len(shown) < len(indexes):
        lines.append(f"  ... {len(indexes) - len(shown)} more events (show everything with --all)")
    return lines


def _describe(kind: str, index: int, rows: Mapping[str, list[Any]], names: _Names) -> str:
    if kind == LAUNCH:
        return f"launch {names.kernel_name(rows['kernel'][index])}" + (
            " [adjoint]" if rows["adjoint"][index] else ""
        )
    if kind == CMD_LAUNCH:
        return f"cmd launch {names.kernel_name(rows['kernel'][index])}"
    if kind == MEMSET:
        value = rows["value"][index]
        return "memset" if value is None else f"memset {value:g}"
    if kind == TAPE_ZERO:
        return "tape.zero()"
    if kind == TAPE_RESET:
        return "tape.reset()"
    if kind in (SET_REQUIRES_GRAD, SET_RETAIN_GRAD):
        attribute = "requires_grad" if kind == SET_REQUIRES_GRAD else "retain_grad"
        return f"{names.array(rows['array_id'][index])}.{attribute} = {bool(rows['value'][index])}"
    if kind == SET_GRAD:
        return f"{names.array(rows['array_id'][index])}.grad = ..."
    return kind  # copy, native, record_func


def _flows(seqs: list[int], accesses: pa.Table, names: _Names) -> dict[int, str]:
    """``reads a, b -> writes c`` for each shown event; only their accesses are converted."""
    if not seqs or accesses.num_rows == 0:
        return {}
    selected = accesses.filter(pc.is_in(accesses.column("seq"), value_set=pa.array(seqs, pa.int64())))
    reads: dict[int, list[str]] = defaultdict(list)
    writes: dict[int, list[str]] = defaultdict(list)
    for seq, array_id, role, flags, arg, field in zip(
        *(selected.column(name).to_pylist() for name in ("seq", "array_id", "role", "flags", "arg", "field"))
    ):
        label = names.array(array_id, f"{arg}.{field}" if arg and field else arg)
        if role in (ROLE_READ, ROLE_READWRITE):
            reads[seq].append(label)
        if role in (ROLE_WRITE, ROLE_READWRITE):
            writes[seq].append(label + (" (+=)" if (flags or 0) & FLAG_ACCUMULATE else ""))
    flows = {}
    for seq in set(reads) | set(writes):
        parts = []
        if reads[seq]:
            parts.append("reads " + ", ".join(_unique(reads[seq])))
        if writes[seq]:
            parts.append("writes " + ", ".join(_unique(writes[seq])))
        flows[seq] = " -> ".join(parts)
    return flows


def _backward_flow(counts: Mapping[str, int]) -> str:
    nouns: tuple[tuple[str, str, str], ...] = (
        (LAUNCH, "adjoint launch", "adjoint launches"),
        (COPY, "copy", "copies"),
    )
    nouns += ((MEMSET, "memset", "memsets"), (NATIVE, "native call", "native calls"))
    parts = [
        f"{counts[kind]} {one if counts[kind] == 1 else many}"
        for kind, one, many in nouns
        if counts.get(kind)
    ]
    return ", ".join(parts) or "nothing replayed"


def _arrays_section(
    arrays: pa.Table, names: _Names, limits: Limits, final: Mapping[tuple[int, str], bool]
) -> list[str]:
    """The arrays table; requires_grad and retain_grad as they were at the end of the run."""
    total = arrays.num_rows
    lines = [f"arrays: {total}"]
    if total == 0:
        return lines
    columns = {
        name: arrays.column(name).to_pylist()
        for name in ("array_id", "alloc_id", "kind", "site", "shape", "dtype", "requires_grad", "retain_grad")
    }
    by_alloc: dict[int, list[int]] = defaultdict(list)
    for array_id, alloc_id in zip(columns["array_id"], columns["alloc_id"]):
        if alloc_id is not None and alloc_id >= 0:
            by_alloc[alloc_id].append(array_id)
    shown = total if limits.arrays is None else min(total, limits.arrays)
    table = [("label", "kind", "allocated at", "shape", "dtype", "requires_grad", "retain_grad", "aliases")]
    for row in range(shown):
        array_id = columns["array_id"][row]
        others = [other for other in by_alloc.get(columns["alloc_id"][row], ()) if other != array_id]
        aliases = _unique(names.array(other) for other in others)
        shape = columns["shape"][row]
        table.append(
            (
                names.array(array_id),
                columns["kind"][row] or "?",
                names.site(columns["site"][row]),
                "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"
                if shape
                else "()",
                columns["dtype"][row] or "?",
                _yes_no(final.get((array_id, "requires_grad"), columns["requires_grad"][row])),
                _yes_no(final.get((array_id, "retain_grad"), columns["retain_grad"][row])),
                _fold_list(aliases, 4) or "-",
            )
        )
    lines += _columns(table, indent="  ")
    if shown < total:
        lines.append(f"  ... {total - shown} more arrays (show everything with --all)")
    return lines


# ----------------------------------------------------------------------- helpers


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _fold_list(items: list[str], keep: int) -> str:
    if len(items) <= keep:
        return ", ".join(items)
    return ", ".join(items[:keep]) + f", +{len(items) - keep}"


def _yes_no(value: Any) -> str:
    return "?" if value is None else ("yes" if value else "no")


def _columns(table: Sequence[tuple[str, ...]], indent: str) -> list[str]:
    """Left-aligned columns; the last column is not padded (it is free text)."""
    if not table:
        return []
    widths = [max(len(row[column]) for row in table) for column in range(len(table[0]) - 1)]
    lines = []
    for row in table:
        cells = [cell.ljust(width) for cell, width in zip(row, widths)]
        lines.append((indent + "  ".join([*cells, row[-1]])).rstrip())
    return lines
