"""What a gradient check measures: the read, its parameters, its backward window, its objective.

Pure (no Warp). The AD side of a check is the gradient *the program reads*: the value of
``param.grad`` at one of the program's gradient reads (:mod:`~warptrace.analysis.grad_reads`:
an optimizer launch, a copy, ``numpy()``, an export to torch, or memory torch reads on its
own). The default is the first read; ``at`` picks another (a number, ``"first"``,
``"mid"``, ``"last"``).

The parameters of a read are the arrays whose gradient it reads; each one is *its own
allocation*: an array rebuilt every iteration is a new parameter each iteration, told
apart by its role (allocation site, how many arrays that site allocated before it, shape),
never by name or address. A parameter's *window* is the backward calls since its gradient
was last cleared or allocated; the read's window is the union, and the objective is the sum,
over those backward calls, of what each one differentiates: its ``loss=``, plus Σ seed·y
for every array y whose gradient was seeded by hand (``grads={y: seed}``, ``y.grad = seed``,
``y.grad.fill_(c)``, ``y.grad.assign(...)``), which is exactly the function whose gradient
the accumulated ``.grad`` claims to be.

Each parameter is perturbed just before its first read on a tape of its window (a tape
position the probe finds again in a fresh run), so losses from before its window, which
its value cannot change, stay out of the difference.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from warptrace.analysis.bisect import Leaf, Recording, arg_index, leaves, recordings
from warptrace.analysis.dataflow import dataflow_of
from warptrace.analysis.findings import Finding, Location, Severity
from warptrace.analysis.grad_reads import (
    STALE_OLD_FORWARD,
    STALE_REPLAYED,
    ArrayReads,
    ReadPoint,
    array_reads,
    read_points,
    unread_points,
)
from warptrace.analysis.graphs import measurable
from warptrace.analysis.model import K, Model
from warptrace.errors import UsageError
from warptrace.trace import schema as S

READ_NAMES = ("first", "mid", "last")


@dataclass(frozen=True)
class Role:
    """What a parameter is across runs: the array allocated at this site, the ``ordinal``-th
    (0-based) of that shape and kind (owned, external, view) there, whatever its address (a graph replay or a fresh process
    gives it another one)."""

    file: str
    line: int
    ordinal: int
    shape: tuple[int, ...]

    def describe(self) -> str:
        there = f", allocation {self.ordinal + 1} there" if self.ordinal else ""
        return f"{self.file}:{self.line}{there}"

    def as_json(self) -> dict[str, object]:
        """The role as the probe's configuration and the JSON report write it."""
        return {"file": self.file, "line": self.line, "ordinal": self.ordinal, "shape": list(self.shape)}


@dataclass
class Param:
    label: str
    array_id: int
    allocation: Location
    size: int
    dtype: str
    backward: int  # the recording (by backward number) holding the first read
    tape_ordinal: int
    epoch: int
    position: int
    arg: int
    field: str
    read_location: Location  # the operation that first reads it
    first_read_seq: int
    role: Role | None = None
    window: list[int] = dataclasses.field(default_factory=list)  # backward numbers its read value holds


@dataclass
class Seed:
    """A hand seed of a backward in the window: the objective gains Σ seed·y."""

    backward: int
    label: str  # y
    array_id: int
    size: int
    how: str  # "grads=", "fill_", "assign", ".grad ="
    location: Location  # where the seed is set
    tape_ordinal: int  # where a probe run finds y: an operation of the backward's recording
    epoch: int
    position: int
    arg: int
    field: str
    constant: float | None = None  # the value of a scalar ``fill_`` seed (the same in every run)


@dataclass
class Measurement:
    window: list[Recording]
    params: list[Param]
    read_seq: int | None  # where the program reads the gradient (None: never read)
    notes: list[str] = field(default_factory=list)
    undecided: str | None = None  # why no sound measurement is possible
    # the seeded loss is turned into another value by untaped work before the backward: an
    # agreement then only concerns the seeded loss, not the program's objective
    objective_off_tape: str | None = None
    seeds: list[Seed] = field(default_factory=list)
    read: ReadPoint | None = None  # the read measured
    reads: list[ReadPoint] = field(default_factory=list)  # every read point of the recording
    read_location: Location | None = None

    @property
    def backwards(self) -> list[int]:
        return [recording.backward for recording in self.window]

    def terms(self, recording: Recording) -> list[str]:
        """What backward ``recording`` adds to the objective, in words."""
        out = [recording.loss_label or "loss"] if recording.loss_array >= 0 else []
        out += [f"Σ seed·{seed.label}" for seed in self.seeds if seed.backward == recording.backward]
        return out

    def describe(self) -> str:
        """The function whose gradient is measured, in words."""
        parts = []
        for recording in self.window:
            terms = " + ".join(self.terms(recording)) or "nothing"
            parts.append(f"{terms} at backward {recording.backward}" if len(self.window) > 1 else terms)
        return "the gradient of " + (" + ".join(f"({p})" for p in parts) if len(parts) > 1 else parts[0])


# --------------------------------------------------------------------------- roles


def role_of(model: Model, array_id: int) -> Role | None:
    """The role of an array: allocation site, its rank among the arrays of that shape made there."""
    info = model.arrays.get(array_id)
    if info is None:
        return None
    sites = _allocation_sites(model)
    site = sites.get(array_id, -1)
    if site < 0:
        return None
    location = model.location(site)
    ordinal = sum(
        1
        for other in model.arrays.values()
        if other.array_id < array_id
        and other.kind == info.kind
        and other.shape == info.shape
        and sites.get(other.array_id) == site
    )
    return Role(location.file, location.line, ordinal, info.shape)


def _allocation_sites(model: Model) -> dict[int, int]:
    """array_id -> its allocation site; an array made over another framework's memory
    (``wp.from_torch``) has the site of the bridge event that made it."""
    cached = model.derived.get("allocation_sites")
    if cached is None:
        cached = {a: model.allocation_site(a) for a in model.arrays}
        bridges = model.events_of_kind(S.BRIDGE)
        for ev in bridges.tolist():
            array_id = int(model.array_id[ev])
            if cached.get(array_id, 0) < 0:
                cached[array_id] = int(model.site[ev])
        model.derived["allocation_sites"] = cached
    return cached


# --------------------------------------------------------------------------- seeds


_SEED_KINDS = {K[S.MEMSET]: "fill_", K[S.COPY]: "assign", K[S.SET_GRAD]: ".grad ="}


def _seeds(model: Model, recording: Recording) -> tuple[list[Seed], str | None]:
    """The hand seeds of a backward, or why they cannot be measured."""
    flow = dataflow_of(model)
    call = next((c for c in flow.backward_calls if c.begin_seq == recording.backward_seq), None)
    if call is None:
        return [], None
    found = []
    for ev, grad_id, owner, from_grad in flow.seeds(call):
        if model.parent[ev] >= 0:
            continue  # the grad copy nested in a forward wp.copy (Warp's own, gradients zero then)
        if from_grad:
            return [], (
                f"backward {recording.backward} is seeded with an adjoint computed from another gradient "
                f"(at {_where(model, ev)}: hand-written checkpointing, an implicit-function adjoint): its "
                "objective is that of the computation which produced the adjoint, which the probe does not chain"
            )
        if owner < 0:
            return [], f"backward {recording.backward} is seeded at {_where(model, ev)} into an unknown array"
        place = _position_of(model, recording, owner)
        label = model.array_label(owner)
        if place is None:
            return [], (
                f"backward {recording.backward} is seeded on {label} ({_where(model, ev)}), an array its tape "
                "does not touch (an adjoint launched by hand in between?): the objective is not a function of "
                "what the tape records"
            )
        position, arg, field_path = place
        how = "grads=" if ev == call.begin_ev else _SEED_KINDS.get(int(model.kind[ev]), "write")
        installed = model.events_of_kind(S.SET_GRAD)
        installed = installed[
            (model.array_id[installed] == owner)
            & (model.ref_id[installed] == grad_id)
            & (installed > ev)
            & (installed < call.begin_ev)
        ]
        if how != "grads=" and len(installed):
            how = ".grad ="  # an array filled, then made y's gradient
        info = model.arrays.get(owner)
        constant = float(model.value[ev]) if how == "fill_" and np.isfinite(model.value[ev]) else None
        found.append(
            Seed(
                backward=recording.backward,
                label=label,
                array_id=owner,
                size=info.size if info else 0,
                how=how,
                location=model.event_location(ev, "seed"),
                tape_ordinal=recording.tape_ordinal,
                epoch=recording.epoch,
                position=position,
                arg=arg,
                field=field_path,
                constant=constant,
            )
        )
    return found, None


def _position_of(model: Model, recording: Recording, array_id: int) -> tuple[int, int, str] | None:
    """(tape position, argument index, field) where the recording touches ``array_id``: its
    last write there (the value the backward differentiates), else its last access."""
    info = model.arrays.get(array_id)
    if info is None:
        return None
    best: tuple[int, int, str] | None = None
    best_write = False
    for position, ev in enumerate(recording.events):
        for row in model.accesses_of(ev):
            other = int(model.acc_array[row])
            same = other == array_id or (
                int(model.acc_alloc[row]) == info.alloc_id
                and model.arrays.get(other) is not None
                and model.arrays[other].hull == info.hull
                and model.arrays[other].shape == info.shape
            )
            if not same or model.acc_flags[row] & S.FLAG_GRAD:
                continue
            index = arg_index(model, ev, row)
            if index < 0:
                continue
            writes = int(model.acc_role[row]) in (S.ROLE_WRITE, S.ROLE_READWRITE)
            if writes or not best_write:
                best, best_write = (position, index, str(model.acc_field[row])), writes
    return best


def _where(model: Model, ev: int) -> str:
    loc = model.event_location(ev)
    return f"{loc.file}:{loc.line}"


# --------------------------------------------------------------------------- checks


def _off_tape_objective(model: Model, window: list[Recording]) -> str | None:
    """An untaped launch that reads a seeded loss after the tape last wrote it and before its
    backward, and writes a scalar: the program's objective is computed off the tape."""
    launches = model.events_of_kind(S.LAUNCH)
    for recording in window:
        loss = model.arrays.get(recording.loss_array)
        if loss is None or not recording.events:
            continue
        last = int(model.seq[recording.events[-1]])
        between = launches[(model.seq[launches] > last) & (model.seq[launches] < recording.backward_seq)]
        for ev in between.tolist():
            if model.recorded[ev] or model.adjoint[ev] or model.phase[ev] != 0:
                continue
            rows = list(model.accesses_of(ev))
            reads_loss = any(
                int(model.acc_alloc[r]) == loss.alloc_id
                and model.acc_role[r] in (S.ROLE_READ, S.ROLE_READWRITE)
                for r in rows
            )
            scalars = [
                int(model.acc_array[r])
                for r in rows
                if model.acc_role[r] in (S.ROLE_WRITE, S.ROLE_READWRITE)
                and int(model.acc_alloc[r]) != loss.alloc_id
                and model.arrays.get(int(model.acc_array[r])) is not None
                and model.arrays[int(model.acc_array[r])].size == 1
            ]
            if reads_loss and scalars:
                where = model.event_location(ev)
                return (
                    f"backward {recording.backward} is seeded on {model.array_label(recording.loss_array)}, "
                    f"but the untaped launch at {where.file}:{where.line} turns it into "
                    f"{model.array_label(scalars[0])} (objective off the tape)"
                )
    return None


def _stale_read(
    model: Model,
    all_recordings: list[Recording],
    leaves_of: dict[int, list[Leaf]],
    params: list[Param],
    window: list[Recording],
    read_seq: int | None,
) -> str | None:
    """The gradient is read while a newer forward that reads the parameters waits for its
    backward: the value read belongs to the previous forward (a one-step delay). The same
    recording backpropagated again (Jacobian rows: one tape, a seed per row) is no newer
    forward."""
    if read_seq is None:
        return None
    ids = {p.array_id for p in params}
    measured = {(r.tape_id, r.epoch) for r in window}
    for recording in all_recordings:
        if not recording.events or recording.backward_seq < read_seq:
            continue
        if (recording.tape_id, recording.epoch) in measured:
            continue
        if int(model.seq[recording.events[0]]) > read_seq:
            continue
        if any(leaf.array_id in ids for leaf in leaves_of[recording.backward_seq]):
            where = model.event_location(model.ev_of_seq(read_seq))
            return (
                f"the gradient is read at {where.file}:{where.line} after the forward of backward "
                f"{recording.backward} was recorded and before that backward ran: the value read belongs "
                "to the previous forward (a stale read)"
            )
    return None


# --------------------------------------------------------------------------- the measurement


def read_number(at: int | str | None, count: int) -> int | None:
    """The read point ``at`` names (1-based) among ``count``; None for the default choice."""
    if at is None:
        return None
    if isinstance(at, str):
        if at not in READ_NAMES:
            raise UsageError(f"--at {at}: a read number, or one of {', '.join(READ_NAMES)}")
        return {"first": 1, "mid": (count + 1) // 2, "last": count}[at] if count else 1
    return int(at)


def measurement(
    model: Model,
    at: int | str | None = None,
    labels: list[str] | None = None,
    unseen_clears: dict[int, list[int]] | None = None,
) -> Measurement:
    """The window, parameters and objective of the ``at``-th gradient read of the program
    (default: the first one whose backward calls are executed, not captured into a graph).
    ``unseen_clears``: array_id -> seqs of backward calls after which its gradient was found
    cleared in a probe run, out of the recording's sight (another framework zeroed it)."""
    all_recordings = [r for r in recordings(model) if r.events]
    if not all_recordings:
        return Measurement([], [], None, undecided="the program never backpropagates a tape")
    # the leaves of each recording, once (keyed by its backward's seq)
    leaves_of = {r.backward_seq: leaves(model, r.events) for r in all_recordings}
    candidates: dict[int, Leaf] = {}
    for recording in all_recordings:
        for leaf in leaves_of[recording.backward_seq]:
            candidates.setdefault(leaf.array_id, leaf)
    labels_known = sorted({leaf.label for leaf in candidates.values()})
    if labels:
        unknown = [label for label in labels if label not in labels_known]
        if unknown:
            raise UsageError(
                f"no differentiable leaf named {', '.join(unknown)} on a backpropagated tape "
                f"(leaves: {', '.join(labels_known) or 'none'})"
            )
    executed = [r for r in all_recordings if r.executed]
    leaf_sets = {seq: {leaf.array_id for leaf in found} for seq, found in leaves_of.items()}
    reads: dict[int, ArrayReads] = array_reads(model, list(candidates), leaf_sets)
    ends = model.seq[model.events_of_kind(S.BACKWARD_END)]
    for array_id, after in (unseen_clears or {}).items():
        if array_id in reads:  # cleared right after that backward ended (and was read)
            extra = [int(ends[min(int(np.searchsorted(ends, seq)), len(ends) - 1)]) for seq in after]
            reads[array_id].clears = sorted(set(reads[array_id].clears) | set(extra))
    if labels:
        chosen = [a for a, leaf in candidates.items() if leaf.label in labels]
    else:
        chosen = [a for a in candidates if reads[a].reads or reads[a].implicit]
    notes: list[str] = []
    if chosen and any(reads[a].reads or reads[a].implicit for a in chosen):
        first_seq = {r.backward_seq: int(model.seq[r.events[0]]) for r in executed if r.events}
        last_seq = {r.backward_seq: int(model.seq[r.events[-1]]) for r in executed if r.events}
        points = read_points(executed, [reads[a] for a in chosen], first_seq, last_seq)
    else:
        orphan = None if labels else _unfilled_read(model, all_recordings)
        if orphan is not None:
            return Measurement([], [], None, notes, undecided=orphan)
        if not chosen:
            chosen = list(candidates)
        notes.append("the program never reads a parameter gradient: measuring each backward on its own")
        wanted = set(chosen)
        points = unread_points(
            executed,
            {seq: [leaf for leaf in found if leaf.array_id in wanted] for seq, found in leaves_of.items()},
        )
    if not points:
        if not executed:
            reason = (
                "every backward of the run is captured into a graph that no wp.capture_launch replays "
                "(before the recording stopped)"
            )
        else:
            first = min((s for a in chosen for s in reads[a].reads), default=None)
            where = f" (first read at {_where(model, model.ev_of_seq(first))})" if first is not None else ""
            reason = (
                f"the program clears the gradient between each backward and its read{where}: the value "
                "it reads is zero whatever the tape computes"
            )
        return Measurement([], [], None, notes, undecided=reason)
    replays = model.seq[model.events_of_kind(S.CAPTURE_LAUNCH)]
    # a graph replayed between a window's start and the read runs work the gradient depends on:
    # measurable when those replays run the window's operations (graphs.measurable)
    replayed = [
        bool(np.any((replays > point.start) & (replays < point.seq)))
        and not measurable(model, point.window, point.start, point.seq)
        for point in points
    ]
    number = read_number(at, len(points))
    if number is None:
        plain = [i for i, flag in enumerate(replayed) if not flag]
        number = plain[0] + 1 if plain else 1
        if number > 1:
            notes.append(
                f"gradient reads 1-{number - 1} mix graph replays with operations outside them; "
                f"measuring read {number}"
            )
        stale_next = points[number].stale if number < len(points) else ""
        if stale_next and stale_next != STALE_OLD_FORWARD and not replayed[number]:
            number += 1
            if points[number - 1].stale == STALE_REPLAYED:
                notes.append(
                    f"the backward before read {number} replays operations recorded before read {number - 1} "
                    f"(a tape never reset): read {number} is the one measured (--at {number - 1} for the first)"
                )
            else:
                notes.append(
                    f"the gradient is not cleared between reads {number - 1} and {number}: read {number} holds "
                    f"both backward passes, so that is the one measured (--at {number - 1} for the first alone)"
                )
    if number < 1 or number > len(points):
        raise UsageError(f"--at {at}: the recorded run has {len(points)} gradient read(s) after a backward")
    point = points[number - 1]
    params = _params(model, point, leaves_of)
    window = point.window
    result = Measurement(window, params, point.seq, notes, read=point, reads=points)
    if point.seq >= 0 and point.seq <= int(model.seq[-1]):
        try:
            result.read_location = model.event_location(model.ev_of_seq(point.seq), "read")
        except KeyError:
            result.read_location = None
    result.objective_off_tape = _off_tape_objective(model, window) or _stale_read(
        model, all_recordings, leaves_of, params, window, point.seq
    )
    seed_problem = None
    for recording in window:
        found, problem = _seeds(model, recording)
        seed_problem = seed_problem or problem
        result.seeds += found
        if recording.loss_array < 0 and not found and problem is None:
            seed_problem = f"backward {recording.backward} has neither loss= nor a seeded gradient"
    if not params:
        result.undecided = "the chosen parameters are not read by the backpropagated tapes of this window"
    elif replayed[number - 1]:
        result.undecided = (
            "the measured gradient mixes a graph replay with operations outside it (a tape recorded across a "
            "capture's boundary, or a replay of other work between the gradient's clear and its read): the "
            "probe perturbs before a replay and reads after it; measure another read (--at)"
        )
    elif point.stale == STALE_OLD_FORWARD:
        result.undecided = (
            f"the backward before read {number} replays only operations recorded before read {number - 1} (the "
            "tape is backpropagated again without recording anything new): the objective is not recomputed, so "
            "finite differences of it measure the gradient where it was recorded, not where this read is taken "
            f"(--at {number - 1} measures an earlier read)"
        )
    elif seed_problem:
        result.undecided = seed_problem
    elif any(p.arg < 0 for p in params):
        result.undecided = "a parameter is first read by an operation the probe cannot address"
    return result


def _params(model: Model, point: ReadPoint, leaves_of: dict[int, list[Leaf]]) -> list[Param]:
    """Each array read at ``point``, perturbed at its first read in time on a tape of its window
    (tapes may record in one order and backpropagate in another) after its gradient was last
    cleared: an earlier read would also change what the program did with the gradient it read
    before (an update). A recording replayed whole after the clear (a tape backpropagated again)
    has no such read: its first read then."""
    params = []
    for array_id, window in point.windows.items():
        reads_here = [
            (int(model.seq[recording.events[leaf.first_position]]), recording, leaf)
            for recording in window
            for leaf in leaves_of[recording.backward_seq]
            if leaf.array_id == array_id
        ]
        if not reads_here:
            continue
        first_seq, recording, leaf = min(reads_here, key=lambda item: item[0])
        cleared = point.starts.get(array_id, -1)
        if first_seq < cleared:
            later = _first_read_after(model, [r for _, r, _ in reads_here], array_id, cleared)
            if later is not None:
                first_seq, recording, position, arg, field_path = later
                leaf = dataclasses.replace(leaf, first_position=position, arg=arg, field=field_path)
        role = role_of(model, array_id)
        allocation = leaf.allocation
        if allocation.line == 0 and role is not None:  # made over another framework's memory
            allocation = Location(role.file, role.line, "allocation")
        params.append(
            Param(
                label=leaf.label,
                array_id=array_id,
                allocation=allocation,
                size=leaf.size,
                dtype=leaf.dtype,
                backward=recording.backward,
                tape_ordinal=recording.tape_ordinal,
                epoch=recording.epoch,
                position=leaf.first_position,
                arg=leaf.arg,
                field=leaf.field,
                read_location=model.event_location(recording.events[leaf.first_position], "read"),
                first_read_seq=first_seq,
                role=role,
                window=[r.backward for r in window],
            )
        )
    params.sort(key=lambda p: p.first_read_seq)
    return params


def _unfilled_read(model: Model, all_recordings: list[Recording]) -> str | None:
    """The program reads, after a backward, the gradient of an array that no backpropagated
    tape touches (a parameter used only by launches above ``with tape:``): that gradient is
    zero whatever the objective, and the probe can perturb only what a tape reads."""
    on_tape = {
        int(model.acc_alloc[row]) for r in all_recordings for ev in r.events for row in model.accesses_of(ev)
    }
    first_backward = min(r.backward_seq for r in all_recordings)
    value_reads = model.events_of_kind(S.VALUE_READ)
    for ev in value_reads[model.seq[value_reads] > first_backward].tolist():
        info = model.arrays.get(int(model.array_id[ev]))
        if info is None or info.grad_of < 0:
            continue
        owner = model.arrays.get(info.grad_of)
        if owner is None or owner.alloc_id in on_tape:
            continue
        label = model.array_label(info.grad_of)
        return (
            f"the program reads the gradient of {label} ({_where(model, ev)}), which no backpropagated tape "
            f"reads: it holds no gradient of any objective (is {label} used by launches outside the tape?), "
            "and the probe can only perturb what a tape reads"
        )
    return None


def _first_read_after(
    model: Model, window: list[Recording], array_id: int, after: int
) -> tuple[int, Recording, int, int, str] | None:
    """(seq, recording, position, argument index, field) of the first operation of the window's
    recordings that reads ``array_id`` after seq ``after``."""
    best: tuple[int, Recording, int, int, str] | None = None
    for recording in window:
        for position, ev in enumerate(recording.events):
            seq = int(model.seq[ev])
            if seq <= after or (best is not None and seq >= best[0]):
                continue
            for row in model.accesses_of(ev):
                if int(model.acc_array[row]) != array_id or model.acc_flags[row] & S.FLAG_GRAD:
                    continue
                if int(model.acc_role[row]) not in (S.ROLE_READ, S.ROLE_READWRITE):
                    continue
                index = arg_index(model, ev, row)
                if index >= 0:
                    best = (seq, recording, position, index, str(model.acc_field[row]))
                    break
    return best


# --------------------------------------------------------------------------- what an agreement covers


def _evidence_seqs(finding: Finding) -> list[int]:
    """Where a finding happens: its first occurrence (``first_seq``), else every seq of its evidence."""
    first = finding.evidence.get("first_seq")
    if isinstance(first, int):
        return [first]
    return [
        s
        for key, value in finding.evidence.items()
        if "seq" in key
        for s in (value if isinstance(value, list) else [value])
        if isinstance(s, int)
    ]


def _span(point: ReadPoint, model: Model) -> tuple[int, int]:
    """The seqs a measurement of ``point`` exercises: from the first operation recorded for its
    window to the read."""
    firsts = [int(model.seq[r.events[0]]) for r in point.window if r.events]
    return (min(firsts) if firsts else point.start, point.seq)


def unexercised(
    findings: list[Finding], model: Model, chosen: Measurement
) -> list[tuple[Finding, int | None]]:
    """The error findings of the analysis that a measurement of ``chosen`` did not exercise (their
    first occurrence does not lie between the window's first recorded operation and the read),
    each with the first read of the recording whose measurement would (None: none of them)."""
    if chosen.read is None:
        return []
    lo, hi = _span(chosen.read, model)
    spans = [(point.number, *_span(point, model)) for point in chosen.reads]
    out: list[tuple[Finding, int | None]] = []
    for finding in findings:
        if finding.severity < Severity.ERROR:
            continue
        seqs = _evidence_seqs(finding)
        if any(lo <= seq <= hi for seq in seqs):
            continue
        later = next((number for number, a, b in spans if any(a <= seq <= b for seq in seqs)), None)
        out.append((finding, later))
    return out
