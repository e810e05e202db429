"""What a gradient check measures: the parameters, the backward window, the perturbation points.

Pure (no Warp). The AD side of a check is the gradient *the program reads*: the value
of ``param.grad`` at the program's first gradient read (an optimizer launch, a copy, a
``.numpy()``) after at least one backward. When the program accumulates over several
backward calls before reading (a tape per frame, micro-batches), all of them form the
*window* and the objective is the sum of their losses, exactly the function whose
gradient the accumulated ``.grad`` claims to be. The window starts after the last
zeroing of the gradient before the read.

Parameters default to the leaves of the window's recordings (read there, never written
there, with a gradient buffer) whose gradient the program reads. Each is perturbed
just before its first read in the window, which is a tape position the probe finds
again in a fresh run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from warptrace.analysis.bisect import Leaf, Recording, leaves, recordings
from warptrace.analysis.dataflow import dataflow_of
from warptrace.analysis.findings import Location
from warptrace.analysis.model import K, Model
from warptrace.errors import UsageError
from warptrace.trace import schema as S


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

    @property
    def backwards(self) -> list[int]:
        return [recording.backward for recording in self.window]


def _grad_ids(model: Model, array_id: int) -> set[int]:
    ids = {a for a, info in model.arrays.items() if info.grad_of == array_id}
    ids |= {ref for ref, owner in dataflow_of(model).grad_owner.items() if owner == array_id}
    views = {a for a, info in model.arrays.items() if info.base_id in ids}
    return ids | views


def _grad_events(model: Model, grad_ids: set[int]) -> tuple[list[int], list[int]]:
    """Seqs where the program reads these grad buffers, and where it clears them (outside backward)."""
    reads: list[int] = []
    clears: list[int] = []
    ids = np.fromiter(grad_ids, dtype=np.int64, count=len(grad_ids))
    value_reads = model.events_of_kind(S.VALUE_READ)
    for ev in value_reads[np.isin(model.array_id[value_reads], ids)].tolist():
        reads.append(int(model.seq[ev]))
    rows = np.nonzero(np.isin(model.acc_array, ids))[0]
    for row in rows.tolist():
        ev = int(model.acc_ev[row])
        if ev < 0 or model.phase[ev] != 0 or model.adjoint[ev]:
            continue
        role = int(model.acc_role[row])
        if role in (S.ROLE_READ, S.ROLE_READWRITE):
            reads.append(int(model.seq[ev]))
        elif role == S.ROLE_WRITE and model.kind[ev] == K[S.MEMSET]:
            clears.append(int(model.seq[ev]))
    return sorted(set(reads)), sorted(set(clears))


def _windows(
    all_recordings: list[Recording], reads: list[int], clears: list[int]
) -> list[tuple[int, int, list[Recording], bool]]:
    """Per gradient read that follows a new backward: (start, read, backward calls, stale).

    The gradient in the buffer at a read is the sum over every backward since it was last
    cleared, so that is the window; *stale* when it also holds backward calls from before
    the previous read (nobody cleared the buffer in between). A backward recorded into a
    graph capture did not run there (it runs at each replay): it belongs to no window."""
    all_recordings = [r for r in all_recordings if r.executed]
    if not reads:
        return [(r.backward_seq - 1, r.backward_seq + 1, [r], False) for r in all_recordings]
    windows = []
    previous = -1
    for read in reads:
        cleared = max((c for c in clears if c < read), default=-1)
        window = [r for r in all_recordings if cleared < r.backward_seq < read]
        fresh = [r for r in window if r.backward_seq > previous]
        previous = read
        if fresh:
            windows.append((cleared, read, window, len(fresh) < len(window)))
    return windows


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
    read_seq: int | None,
) -> str | None:
    """The gradient is read while a newer forward that reads the parameters waits for its
    backward: the value read belongs to the previous forward (a one-step delay)."""
    if read_seq is None:
        return None
    ids = {p.array_id for p in params}
    for recording in all_recordings:
        if not recording.events or recording.backward_seq < read_seq:
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


def measurement(model: Model, at: int | None = None, labels: list[str] | None = None) -> Measurement:
    """The window and the parameters of the ``at``-th gradient the program reads (default:
    the first one whose backward calls are executed, not captured into a graph)."""
    all_recordings = [r for r in recordings(model) if r.events]
    if not all_recordings:
        return Measurement([], [], None, undecided="the program never backpropagates a tape")
    # the leaves of each recording, once (keyed by its backward's seq)
    leaves_of = {r.backward_seq: leaves(model, r.events) for r in all_recordings}
    candidates: dict[int, tuple[Recording, object]] = {}
    for recording in all_recordings:
        for leaf in leaves_of[recording.backward_seq]:
            if leaf.array_id not in candidates:
                candidates[leaf.array_id] = (recording, leaf)
    labels_known = sorted({leaf.label for _, leaf in candidates.values()})  # type: ignore[attr-defined]
    if labels:
        unknown = [label for label in labels if label not in labels_known]
        if unknown:
            raise UsageError(
                f"no differentiable leaf named {', '.join(unknown)} on a backpropagated tape "
                f"(leaves: {', '.join(labels_known) or 'none'})"
            )
    grad_events = {a: _grad_events(model, _grad_ids(model, a)) for a in candidates}
    if labels:
        chosen = [a for a, (_, leaf) in candidates.items() if leaf.label in labels]  # type: ignore[attr-defined]
    else:
        chosen = [a for a in candidates if grad_events[a][0]]
    notes: list[str] = []
    if not chosen:
        chosen = list(candidates)
        if chosen:
            notes.append("the program never reads a parameter gradient: measuring each backward on its own")
    if not chosen:
        return Measurement(
            [], [], None, undecided="no differentiable leaf (requires_grad) is read on a backpropagated tape"
        )
    reads = sorted({seq for a in chosen for seq in grad_events[a][0]})
    clears = sorted({seq for a in chosen for seq in grad_events[a][1]})
    spans = _windows(all_recordings, reads, clears)
    if not spans:
        if not any(r.executed for r in all_recordings):
            reason = "every backward of the run is recorded into a captured graph"
        else:
            where = model.event_location(model.ev_of_seq(reads[0]))
            reason = (
                "the program clears the gradient between each backward and its read (first read at "
                f"{where.file}:{where.line}): the value it reads is zero whatever the tape computes"
            )
        return Measurement([], [], None, notes, undecided=reason)
    windows = [window for _, _, window, _ in spans]
    replays = model.seq[model.events_of_kind(S.CAPTURE_LAUNCH)]
    # a graph replayed between the window's start and the read adds its captured backward to the gradient
    replayed = [bool(np.any((replays > start) & (replays < end))) for start, end, _, _ in spans]
    if at is None:
        plain = [i for i, flag in enumerate(replayed) if not flag]
        at = plain[0] + 1 if plain else 1
        if at > 1:
            notes.append(f"gradient reads 1-{at - 1} follow graph replays; measuring read {at}")
        if at < len(spans) and spans[at][3] and not replayed[at]:
            at += 1
            notes.append(
                f"the gradient is not cleared between reads {at - 1} and {at}: read {at} holds both "
                f"backward passes, so that is the one measured (--at {at - 1} for the first alone)"
            )
    if at < 1 or at > len(windows):
        raise UsageError(f"--at {at}: the recorded run has {len(windows)} gradient read(s) after a backward")
    window = windows[at - 1]
    read_seq = next((r for r in reads if r > window[-1].backward_seq), None)
    params = []
    for array_id in chosen:
        # the first read in time: tapes may record in one order and backpropagate in another
        reads_here = [
            (int(model.seq[recording.events[leaf.first_position]]), recording, leaf)
            for recording in window
            for leaf in leaves_of[recording.backward_seq]
            if leaf.array_id == array_id
        ]
        if not reads_here:
            continue
        first_seq, recording, leaf = min(reads_here, key=lambda item: item[0])
        params.append(
            Param(
                label=leaf.label,
                array_id=array_id,
                allocation=leaf.allocation,
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
            )
        )
    result = Measurement(window, params, read_seq, notes)
    result.objective_off_tape = _off_tape_objective(model, window) or _stale_read(
        model, all_recordings, leaves_of, params, read_seq
    )
    if not params:
        result.undecided = "the chosen parameters are not read by the backpropagated tapes of this window"
    elif replayed[at - 1] or not windows:
        result.undecided = (
            "the measured gradient comes from a captured graph (wp.capture_launch replays the backward): "
            "the probe cannot perturb or read inside a replay; measure a gradient read after a plain backward (--at)"
        )
    elif any(recording.loss_array < 0 for recording in window):
        result.undecided = (
            "a backward in the window has no loss= (the gradient is seeded by hand): the objective "
            "is not a value on the tape, so there is nothing to difference"
        )
    elif any(p.arg < 0 for p in params):
        result.undecided = "a parameter is first read by an operation the probe cannot address"
    return result
