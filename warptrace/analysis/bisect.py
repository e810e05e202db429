"""Bisection plan: where to cut a backpropagated tape for finite-difference checks.

Pure (no Warp): everything comes from the trace. A *recording* is what one backward
call replays: the operations recorded on its tape since the tape was created or last
reset, in order; an operation's index in that list is its *tape position* (exactly its
index in Warp's ``tape.launches``, which is how a probe run finds it again). A cut ``k``
sits between positions ``k - 1`` and ``k``.

For a recording the plan gives

- the repeated step structure (the period of the kernel sequence: "2 launches x 16 steps"),
- the cuts in binary-search order: step boundaries first (the middle one, then the
  quarters, ...), then the cuts inside a step; cuts next to findings come first,
- per cut the buffers *live* across it (written before it on the tape, read after it
  before being overwritten): the surrogate-loss candidates, with label and allocation
  line, and the handle a probe run uses to read them (writer position, argument);
- the differentiable leaves upstream (read on the tape, never written there, with
  ``requires_grad``): what to perturb.

:mod:`warptrace.analysis.measure` chooses the parameters and the backward window of a
measurement; :mod:`warptrace.probe` executes both.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from warptrace.analysis.dataflow import dataflow_of
from warptrace.analysis.findings import Finding, Location
from warptrace.analysis.model import K, Model
from warptrace.errors import WarptraceError
from warptrace.trace import schema as S

MAX_CUTS = 64  # cuts measured in one round of probe runs (the plan lists them all)
_POSITION_KINDS = (K[S.LAUNCH], K[S.COPY], K[S.RECORD_FUNC])


@dataclass
class Recording:
    """The operations one backward call replays."""

    backward: int  # 1-based number of the backward call in the run
    backward_seq: int
    tape_id: int
    tape_ordinal: int  # 0-based creation order of the tape (how a probe run numbers tapes)
    epoch: int  # tape.reset() calls before this recording
    events: list[int]  # event index of each tape position
    loss_array: int
    executed: bool  # False when the operations or the backward ran inside a graph capture
    location: Location  # the backward call
    loss_label: str


@dataclass
class Steps:
    """``prefix`` positions, then ``count`` repetitions of ``period`` positions, then the rest."""

    prefix: int
    period: int
    count: int
    total: int

    def boundaries(self) -> list[int]:
        return [self.prefix + index * self.period for index in range(self.count + 1)]

    def step_of(self, position: int) -> int | None:
        """0-based step holding ``position``, None in the prefix or suffix."""
        if self.period <= 0 or position < self.prefix or position >= self.prefix + self.count * self.period:
            return None
        return (position - self.prefix) // self.period

    def describe(self) -> str:
        if self.count < 2:
            return f"{self.total} operations, no repeated step"
        parts = [f"{self.period} operation{'s' if self.period != 1 else ''} x {self.count} steps"]
        if self.prefix:
            parts.append(f"after {self.prefix} before the first step")
        suffix = self.total - self.prefix - self.count * self.period
        if suffix:
            parts.append(f"then {suffix} after the last")
        return ", ".join(parts)


@dataclass
class Buffer:
    """An array live across a cut, and where a probe run finds it (writer position, argument)."""

    array_id: int
    label: str
    allocation: Location
    position: int
    arg: int
    field: str
    size: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "allocation": {"file": self.allocation.file, "line": self.allocation.line},
            "writer_position": self.position,
            "arg": self.arg,
            "field": self.field,
            "size": self.size,
        }


@dataclass
class Cut:
    k: int  # between positions k-1 and k
    step: int | None  # the step that starts here (a step boundary), None inside a step
    inside_step: int | None  # the step this cut is inside of
    near_findings: list[str]
    live: list[Buffer]
    upstream: list[str] = field(default_factory=list)  # leaves read before the cut: what to perturb

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "step_boundary": self.step,
            "inside_step": self.inside_step,
            "near_findings": self.near_findings,
            "live": [buffer.to_dict() for buffer in self.live],
            "upstream_leaves": self.upstream,
        }


@dataclass
class Leaf:
    array_id: int
    label: str
    allocation: Location
    first_position: int
    arg: int
    field: str
    size: int
    dtype: str


@dataclass
class Plan:
    recording: Recording
    steps: Steps
    cuts: list[Cut]  # binary-search order
    leaves: list[Leaf]
    operations: list[dict[str, Any]] = field(default_factory=list)  # per position: kernel, file, line


# --------------------------------------------------------------------------- recordings


def recordings(model: Model) -> list[Recording]:
    """Every backward call of the run with the operations it replays, in call order."""
    begins = model.events_of_kind(S.BACKWARD_BEGIN)
    creates = model.events_of_kind(S.TAPE_CREATE)
    ordinal = {int(model.tape[ev]): index for index, ev in enumerate(creates)}
    positional = np.isin(model.kind, _POSITION_KINDS) & model.recorded & (model.parent < 0) & ~model.adjoint
    result = []
    # per tape: its events (in seq order) and their seqs, its reset seqs; a backward's
    # operations are a slice of them (searched, so a tape reset every iteration stays linear)
    by_tape: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for number, ev in enumerate(begins.tolist(), start=1):
        tape_id = int(model.tape[ev])
        tape = model.tapes.get(tape_id)
        seq = int(model.seq[ev])
        if tape is None:
            continue
        cached = by_tape.get(tape_id)
        if cached is None:
            tape_events = np.asarray(tape.events, dtype=np.int64)
            cached = by_tape[tape_id] = (
                tape_events,
                model.seq[tape_events],
                np.asarray(tape.resets, dtype=np.int64),
            )
        tape_events, tape_seqs, resets = cached
        epoch = int(np.searchsorted(resets, seq, side="left"))  # resets before the backward
        start = int(resets[epoch - 1]) if epoch else -1
        lo = int(np.searchsorted(tape_seqs, start, side="right"))
        hi = int(np.searchsorted(tape_seqs, seq, side="left"))
        window = tape_events[lo:hi]
        window = window[positional[window]]
        events = window.tolist()
        executed = bool(model.executed[ev]) and bool(np.all(model.executed[window]))
        result.append(
            Recording(
                backward=number,
                backward_seq=seq,
                tape_id=tape_id,
                tape_ordinal=ordinal.get(tape_id, -1),
                epoch=epoch,
                events=events,
                loss_array=int(model.array_id[ev]),
                executed=executed,
                location=model.event_location(ev, "backward"),
                loss_label=model.array_label(int(model.array_id[ev])) if model.array_id[ev] >= 0 else "",
            )
        )
    return result


# --------------------------------------------------------------------------- steps


def step_structure(signatures: list[int]) -> Steps:
    """The period covering the most positions with at least two repetitions (smallest on ties)."""
    n = len(signatures)
    best = Steps(0, 0, 0, n)
    if n < 2:
        return best
    values = np.asarray(signatures, dtype=np.int64)
    candidates: set[int] = set()
    for signature in np.unique(values)[:64]:
        where = np.nonzero(values == signature)[0]
        if len(where) > 1:
            candidates.update(int(gap) for gap in np.unique(np.diff(where))[:16])
    best_cover = 0
    for period in sorted(candidates):
        if 2 * period > n:
            continue
        same = values[:-period] == values[period:]
        run_start, run_len, start, length = 0, 0, 0, 0
        for index, equal in enumerate(same.tolist()):
            if equal:
                if length == 0:
                    start = index
                length += 1
                if length > run_len:
                    run_start, run_len = start, length
            else:
                length = 0
        count = (run_len + period) // period
        if count < 2:
            continue
        cover = count * period
        if cover > best_cover:
            best_cover = cover
            best = Steps(run_start, period, count, n)
    return best


def _binary_order(points: list[int]) -> list[int]:
    """Midpoint first, then the midpoints of each half, breadth first."""
    order: list[int] = []
    intervals = [(0, len(points) - 1)]
    while intervals:
        following = []
        for lo, hi in intervals:
            if lo > hi:
                continue
            mid = (lo + hi) // 2
            order.append(points[mid])
            following += [(lo, mid - 1), (mid + 1, hi)]
        intervals = following
    return order


# --------------------------------------------------------------------------- arguments


def arg_index(model: Model, ev: int, row: int) -> int:
    """The index of an access's argument in the probe's per-position array list."""
    name = str(model.acc_arg[row])
    if model.kind[ev] == K[S.COPY]:
        return {"dest": 0, "src": 1}.get(name, -1)
    kernel = model.kernels.get(int(model.kernel[ev]))
    if kernel is None:
        return -1
    for arg in kernel.args:
        if arg.name == name:
            return arg.index
    return -1


def _reads(model: Model, row: int) -> bool:
    role = int(model.acc_role[row])
    return role in (S.ROLE_READ, S.ROLE_READWRITE) or (
        role == S.ROLE_WRITE and bool(model.acc_flags[row] & S.FLAG_ACCUMULATE)
    )


def _writes(model: Model, row: int) -> bool:
    return int(model.acc_role[row]) in (S.ROLE_WRITE, S.ROLE_READWRITE)


def _is_float(dtype: str) -> bool:
    return not any(word in dtype for word in ("int", "bool", "uint")) and dtype != ""


def _accesses(model: Model, events: list[int]) -> list[tuple[int, int, int]]:
    """(position, event, access row) of every non-grad access, in order."""
    grads = set(model.grad_array_ids.tolist())
    rows = []
    for position, ev in enumerate(events):
        for row in model.accesses_of(ev):
            if int(model.acc_array[row]) in grads or model.acc_flags[row] & S.FLAG_GRAD:
                continue
            rows.append((position, ev, row))
    return rows


def _buffer(model: Model, position: int, ev: int, row: int) -> Buffer:
    array_id = int(model.acc_array[row])
    info = model.arrays.get(array_id)
    return Buffer(
        array_id=array_id,
        label=model.array_label(array_id, str(model.acc_arg[row])),
        allocation=model.location(model.allocation_site(array_id), "allocation"),
        position=position,
        arg=arg_index(model, ev, row),
        field=str(model.acc_field[row]),
        size=info.size if info else 0,
    )


def live_buffers(model: Model, events: list[int]) -> dict[int, list[Buffer]]:
    """Per cut k (1..n-1): the buffers written before k whose next access at or after k reads them."""
    per_alloc: dict[int, dict[int, list[Any]]] = {}  # alloc -> position -> [reads, writer (ev, row)]
    for position, ev, row in _accesses(model, events):
        slot = per_alloc.setdefault(int(model.acc_alloc[row]), {}).setdefault(position, [False, None])
        if _reads(model, row):
            slot[0] = True
        if _writes(model, row):
            slot[1] = (ev, row)
    live: dict[int, list[Buffer]] = {k: [] for k in range(1, len(events))}
    for by_position in per_alloc.values():
        positions = sorted(by_position)
        writer: tuple[int, int, int] | None = None
        for here, following in zip(positions, positions[1:]):
            if by_position[here][1] is not None:
                writer = (here, *by_position[here][1])
            if writer is None or not by_position[following][0]:
                continue
            info = model.arrays.get(int(model.acc_array[writer[2]]))
            if info is None or not _is_float(info.dtype):
                continue
            buffer = _buffer(model, *writer)
            for k in range(here + 1, following + 1):
                live[k].append(buffer)
    return live


def leaves(model: Model, events: list[int]) -> list[Leaf]:
    """Arrays with ``requires_grad`` read on the recording and never written there (first read first)."""
    rows = _accesses(model, events)
    written = {int(model.acc_alloc[row]) for _, _, row in rows if _writes(model, row)}
    found: dict[int, Leaf] = {}
    for position, ev, row in rows:
        array_id = int(model.acc_array[row])
        info = model.arrays.get(array_id)
        if info is None or not _is_float(info.dtype) or array_id in found:
            continue
        if info.alloc_id in written or not _reads(model, row):
            continue
        if not dataflow_of(model).has_grad(array_id, int(model.seq[ev])):
            continue
        found[array_id] = Leaf(
            array_id=array_id,
            label=model.array_label(array_id, str(model.acc_arg[row])),
            allocation=model.location(model.allocation_site(array_id), "allocation"),
            first_position=position,
            arg=arg_index(model, ev, row),
            field=str(model.acc_field[row]),
            size=info.size,
            dtype=info.dtype,
        )
    return list(found.values())


# --------------------------------------------------------------------------- plan


def _signature(model: Model, ev: int) -> int:
    return hash((int(model.kind[ev]), int(model.kernel[ev]), int(model.site[ev])))


def _finding_positions(
    findings: Iterable[Finding], model: Model, recording: Recording
) -> dict[int, list[str]]:
    """Tape positions named in the evidence of findings (by seq)."""
    position_of_seq = {int(model.seq[ev]): position for position, ev in enumerate(recording.events)}
    near: dict[int, list[str]] = {}
    for finding in findings:
        for key, value in finding.evidence.items():
            if "seq" not in key:
                continue
            for seq in value if isinstance(value, list) else [value]:
                if isinstance(seq, int) and seq in position_of_seq:
                    codes = near.setdefault(position_of_seq[seq], [])
                    if finding.code not in codes:
                        codes.append(finding.code)
    return near


def choose_recording(model: Model, findings: list[Finding], tape: int | None = None) -> Recording:
    """The recording to bisect: of tape ``tape`` when given, else one with findings, else the longest."""
    candidates = [r for r in recordings(model) if r.events]
    if tape is not None:
        chosen = [r for r in candidates if r.tape_id == tape]
        if not chosen:
            known = sorted({r.tape_id for r in candidates})
            raise WarptraceError(
                f"tape {tape} is not backpropagated in this trace (backpropagated tapes: "
                f"{', '.join(map(str, known)) or 'none'})"
            )
        return chosen[0]
    if not candidates:
        raise WarptraceError("no backpropagated tape in this trace: nothing to bisect")
    for recording in candidates:
        if _finding_positions(findings, model, recording):
            return recording
    return max(candidates, key=lambda r: len(r.events))


def make_plan(model: Model, recording: Recording, findings: list[Finding] | None = None) -> Plan:
    events = recording.events
    steps = step_structure([_signature(model, ev) for ev in events])
    live = live_buffers(model, events)
    near_positions = _finding_positions(findings or [], model, recording)
    boundaries = [k for k in steps.boundaries() if 0 < k < len(events)] if steps.count >= 2 else []
    boundary_set = set(boundaries)
    inside = [k for k in range(1, len(events)) if k not in boundary_set]
    order = _binary_order(boundaries) + _binary_order(inside)

    def near(k: int) -> list[str]:
        codes: list[str] = []
        for position in (k - 1, k):
            for code in near_positions.get(position, []):
                if code not in codes:
                    codes.append(code)
        return codes

    order.sort(key=lambda k: 0 if near(k) else 1)  # stable: binary order kept within each group
    tape_leaves = leaves(model, events)
    cuts = []
    for k in order:
        boundary = steps.step_of(k) if k in boundary_set else None
        if k in boundary_set and boundary is None:
            boundary = steps.count  # the cut after the last step
        cuts.append(
            Cut(
                k=k,
                step=boundary,
                inside_step=None if k in boundary_set else steps.step_of(k),
                near_findings=near(k),
                live=live.get(k, []),
                upstream=[leaf.label for leaf in tape_leaves if leaf.first_position < k],
            )
        )
    operations = []
    for position, ev in enumerate(events):
        loc = model.event_location(ev)
        kind = S.EVENT_KINDS[int(model.kind[ev])]
        operations.append(
            {
                "position": position,
                "seq": int(model.seq[ev]),
                "kind": kind,
                "kernel": model.kernel_name(ev) if kind == S.LAUNCH else kind,
                "file": loc.file,
                "line": loc.line,
                "step": steps.step_of(position),
            }
        )
    return Plan(recording, steps, cuts, tape_leaves, operations)
