"""Measuring through graph replays: where a probe run meets a replayed recording, and what it can read.

Pure (no Warp). A program that captures its forward and backward once
(``wp.ScopedCapture``) and replays them (``wp.capture_launch``) computes its gradient in
the replays. The analysis sees each replay as its own recording (:mod:`.replay`: the
expanded model); a probe run sees Python calls: the captured ``tape.backward()`` runs
once, at capture time, without executing anything, and every ``capture_launch`` call
replays it. So a replayed recording is reached in a probe run by

- the captured backward call (its Python call number, tape ordinal and epoch, and the tape
  positions of the capture): where the probe finds the arrays of each operation;
- the ``capture_launch`` call number of its replay: just before that call the probe
  perturbs the parameters (the graph reads their memory), just after it reads the
  objective (the loss value, Σ seed·y), the gradient, and the cuts' live buffers (copied
  into fresh memory by copies the probe run captured into the graph right after each
  cut's operation, so later operations of the replay may overwrite the buffers).

What is read after the replay is what the replay left in memory, so the measurement is
sound only where that is what the program's backward and read saw (:func:`replay_problem`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from warptrace.analysis.bisect import Recording, recordings
from warptrace.analysis.model import Model
from warptrace.trace import schema as S


@dataclass(frozen=True)
class Coords:
    """Where a probe run meets a recording of the expanded model."""

    backward: int  # the Python call of Tape.backward (for a replay: the captured call)
    tape_ordinal: int
    epoch: int
    replay: int  # 1-based number of the capture_launch call that replays it; 0: an eager backward
    forward_replay: int  # the same for its operations (a forward captured alone: an eager backward)


def has_replays(model: Model) -> bool:
    return bool(np.any(model.replay >= 0))


def replay_of(model: Model, recording: Recording) -> int:
    """Seq of the ``capture_launch`` whose replay runs the recording's backward and every one of
    its operations; -1 when none of them is replayed; -2 when only some are (a forward captured
    alone and backpropagated eagerly, or the other way round)."""
    evs = [model.ev_of_seq(recording.backward_seq), *recording.events]
    replays = {int(model.replay[ev]) for ev in evs}
    if replays == {-1}:
        return -1
    return replays.pop() if len(replays) == 1 else -2


def forward_replay_of(model: Model, recording: Recording) -> int:
    """Seq of the ``capture_launch`` whose replay runs every operation of the recording; -1 when
    none of them is replayed, -2 when only some are."""
    replays = {int(model.replay[ev]) for ev in recording.events}
    if not replays or replays == {-1}:
        return -1
    return replays.pop() if len(replays) == 1 else -2


def measurable(model: Model, window: list[Recording], start: int, read_seq: int) -> bool:
    """A probe run can measure ``window`` (read at ``read_seq``, gradients cleared at ``start``)
    around graph replays: each recording's operations all run in one replay or none, its backward
    in that replay or eagerly (a forward captured alone), and every ``capture_launch`` between
    the clear and the read replays operations of the window (no other graph touches them)."""
    mine: set[int] = set()
    for recording in window:
        forward = forward_replay_of(model, recording)
        backward = int(model.replay[model.ev_of_seq(recording.backward_seq)])
        if forward == -2 or (backward >= 0 and backward != forward):
            return False
        mine.add(forward)
    launches = model.seq[model.events_of_kind(S.CAPTURE_LAUNCH)]
    between = launches[(launches > start) & (launches < read_seq)]
    return all(int(seq) in mine for seq in between)


def _launch_number(model: Model, seq: int) -> int:
    if seq < 0:
        return 0
    launches = model.seq[model.events_of_kind(S.CAPTURE_LAUNCH)]
    return int(np.searchsorted(launches, seq)) + 1


def coordinates(plain: Model, model: Model, recording: Recording) -> Coords | None:
    """The probe coordinates of ``recording`` (of the expanded ``model``; ``plain``: the model of
    the trace as recorded), or None when its operations are not those of one recorded backward."""
    if plain is model:
        return Coords(recording.backward, recording.tape_ordinal, recording.epoch, 0, 0)
    by_seq = plain.derived.get("recordings_by_seq")
    if by_seq is None:
        by_seq = plain.derived["recordings_by_seq"] = {r.backward_seq: r for r in recordings(plain)}
    begin = model.ev_of_seq(recording.backward_seq)
    original = by_seq.get(int(model.orig_seq[begin]))
    if original is None:
        return None
    mine = [int(model.orig_seq[ev]) for ev in recording.events]
    theirs = [int(plain.seq[ev]) for ev in original.events]
    if mine != theirs:
        return None
    forward = forward_replay_of(model, recording)
    if forward == -2:
        return None
    return Coords(
        original.backward,
        original.tape_ordinal,
        original.epoch,
        _launch_number(model, int(model.replay[begin])),
        _launch_number(model, forward),
    )


def _replay_events(model: Model, replay: int) -> np.ndarray:
    return np.nonzero(model.replay == replay)[0]


def _writes(model: Model, evs: np.ndarray, alloc_id: int, grad: bool) -> int | None:
    """The first event of ``evs`` writing allocation ``alloc_id`` (a gradient buffer when ``grad``).
    An adjoint launch lists the forward arrays with the forward's roles; it writes gradients."""
    for ev in evs.tolist():
        if model.adjoint[ev] and not grad:
            continue
        for row in model.accesses_of(ev):
            if int(model.acc_alloc[row]) != alloc_id:
                continue
            if bool(model.acc_flags[row] & S.FLAG_GRAD) != grad:
                continue
            if int(model.acc_role[row]) in (S.ROLE_WRITE, S.ROLE_READWRITE):
                return ev
    return None


def _where(model: Model, ev: int) -> str:
    loc = model.event_location(ev)
    return f"{loc.file}:{loc.line}"


def replay_problem(
    model: Model,
    window: list[Recording],
    params: list[tuple[int, int, int]],
    objective_arrays: list[tuple[int, int, bool]],
) -> str | None:
    """Why a measurement through the replays of ``window`` would not see what the program saw,
    or None. ``params``: (array_id, backward number, tape position of its first read);
    ``objective_arrays``: (array_id, backward number, seeded by hand) of each loss and seeded y.

    - a parameter is perturbed before the replay: nothing in the replay may write it before
      its first read there;
    - the objective is read after the replay: nothing from the backward's start on may write
      a loss or a seeded array, nor (a hand seed) its gradient, which holds the seed;
    - the gradient is read after the replay: nothing after the backward may write it."""
    by_number = {r.backward: r for r in window}
    for array_id, number, position in params:
        recording = by_number[number]
        replay = forward_replay_of(model, recording)
        if replay < 0:
            continue  # perturbed at its tape position, as without capture
        info = model.arrays.get(array_id)
        if info is None:
            return "a parameter is not a recorded array"
        evs = _replay_events(model, replay)
        first = recording.events[position]
        ev = _writes(model, evs[evs < first], info.alloc_id, False)
        if ev is not None:
            return (
                f"the graph writes {model.array_label(array_id)} ({_where(model, ev)}) before its tape reads it: "
                "a perturbation before the replay would be overwritten"
            )
        grad_id = model.grad_of_owner.get(array_id)
        grad = model.arrays.get(grad_id) if grad_id is not None else None
        end = _backward_end(model, recording) if replay_of(model, recording) >= 0 else None
        if grad is not None and end is not None:
            ev = _writes(model, evs[evs > end], grad.alloc_id, True)
            if ev is not None:
                return (
                    f"the graph writes the gradient of {model.array_label(array_id)} after its backward "
                    f"({_where(model, ev)}): the probe reads it after the replay"
                )
    for array_id, number, seeded in objective_arrays:
        recording = by_number[number]
        info = model.arrays.get(array_id)
        if info is None or replay_of(model, recording) < 0:
            continue  # an eager backward: the objective is read as it starts
        evs = _replay_events(model, replay_of(model, recording))
        after = evs[evs > model.ev_of_seq(recording.backward_seq)]
        ev = _writes(model, after, info.alloc_id, False)
        if ev is None and seeded:
            grad_id = model.grad_of_owner.get(array_id)
            grad = model.arrays.get(grad_id) if grad_id is not None else None
            ev = _writes(model, after, grad.alloc_id, True) if grad is not None else None
        if ev is not None:
            return (
                f"the graph writes {model.array_label(array_id)} or its seed during or after its backward "
                f"({_where(model, ev)}): the objective cannot be read after the replay"
            )
    return None


def _backward_end(model: Model, recording: Recording) -> int | None:
    begin = model.ev_of_seq(recording.backward_seq)
    ends = model.events_of_kind(S.BACKWARD_END)
    later = ends[(ends > begin) & (model.replay[ends] == model.replay[begin])]
    return int(later[0]) if len(later) else None


def probe_coordinates(
    plain: Model, model: Model, window: list[Recording]
) -> tuple[dict[int, Coords], str | None]:
    """Per backward number of ``window`` (numbers of the expanded ``model``) its probe
    coordinates, or why a probe run cannot reach one of them."""
    coords: dict[int, Coords] = {}
    for recording in window:
        found = coordinates(plain, model, recording)
        if found is None:
            return {}, (
                f"backward {recording.backward} replays operations that are not those of one recorded "
                "backward call (a tape recorded across a capture's boundary?)"
            )
        coords[recording.backward] = found
    return coords, None
