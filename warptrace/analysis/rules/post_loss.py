"""Launches recorded after the loss is final and before the backward (post-loss work):
found once per model, used by WT102/WT101 (which leave them to WT105) and WT105.

A launch that feeds the objective of another backward call replaying the same recording
is not post-loss work: one tape recording several heads (``loss_a``, ``loss_b``) and
backpropagating each in turn (``tape.backward(loss_a); tape.zero(); tape.backward(loss_b)``)
is how Warp computes several gradients from one forward pass; each backward runs the
other heads' adjoints on zero seeds, which costs time and changes no gradient."""

from __future__ import annotations

import bisect

import numpy as np

from warptrace.analysis.dataflow import dataflow_of
from warptrace.analysis.model import K, Model, overlaps
from warptrace.analysis.rules.common import shared
from warptrace.trace import schema as S


def post_loss_launches(model: Model) -> dict[int, tuple[int, int, int]]:
    """Recorded forward launches after the loss is final and before the backward:
    launch event -> (event that last wrote the loss, backward_begin event, loss array id)."""
    return shared(model, "post_loss_launches", _post_loss_launches)


def _loss_writes(model: Model, loss_arrays: set[int]) -> dict[int, list[tuple[int, int, int]]]:
    """tape id -> [(seq, ev, array_id)] of recorded forward writes into the memory of any loss array."""
    infos = [model.arrays[a] for a in loss_arrays if a in model.arrays and model.arrays[a].alloc_id >= 0]
    if not infos:
        return {}
    allocs = np.array(sorted({info.alloc_id for info in infos}), dtype=np.int64)
    rows = np.nonzero(((model.acc_role & S.ROLE_WRITE) != 0) & np.isin(model.acc_alloc, allocs))[0]
    evs = model.acc_ev[rows]
    keep = evs >= 0
    rows, evs = rows[keep], evs[keep]
    keep = (
        model.recorded[evs] & ~model.adjoint[evs] & (model.phase[evs] == S.FORWARD) & (model.tape[evs] >= 0)
    )
    rows, evs = rows[keep], evs[keep]
    by_tape: dict[int, list[tuple[int, int, int]]] = {}
    for row, ev in zip(rows.tolist(), evs.tolist()):
        by_tape.setdefault(int(model.tape[ev]), []).append(
            (int(model.seq[ev]), ev, int(model.acc_array[row]))
        )
    return by_tape


def _last_loss_write(
    model: Model, writes: list[tuple[int, int, int]] | None, losses: list[int], start: int, begin: int
) -> int:
    """Event index of the last recorded write into a loss array in (start, begin), -1 if none."""
    if not writes:
        return -1
    infos = [model.arrays[a] for a in losses]
    i = bisect.bisect_left(writes, (begin, -1, -1))
    while i > 0:
        i -= 1
        seq, ev, array_id = writes[i]
        if seq <= start:
            break
        written = model.arrays.get(array_id)
        if written is not None and any(overlaps(written, info) for info in infos):
            return ev
    return -1


def _loss_arrays(model: Model, begin_ev: int) -> list[int]:
    losses = []
    if model.array_id[begin_ev] >= 0:
        losses.append(int(model.array_id[begin_ev]))
    detail = model.detail(begin_ev)
    keys: list[object] = []
    if isinstance(detail, list):
        keys = detail
    elif isinstance(detail, dict):
        keys = list(detail.get("grads", detail.keys()) if "grads" in detail else detail.keys())
    for item in keys:
        try:
            array_id = int(item)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            continue
        if array_id in model.arrays and array_id not in losses:
            losses.append(array_id)
    return [a for a in losses if a in model.arrays]


def _post_loss_launches(model: Model) -> dict[int, tuple[int, int, int]]:
    """Recorded forward launches after the loss is final and before the backward:
    launch event -> (event that last wrote the loss, backward_begin event, loss array id)."""
    backwards = [begin for tape in model.tapes.values() for begin in tape.backward_begins]
    losses_of = {begin: _loss_arrays(model, model.ev_of_seq(begin)) for begin in backwards}
    loss_writes = _loss_writes(model, {a for losses in losses_of.values() for a in losses})
    post_loss: dict[int, tuple[int, int, int]] = {}
    for tape in model.tapes.values():
        if not any(losses_of[begin] for begin in tape.backward_begins):
            continue
        events = np.asarray(tape.events, dtype=np.int64)
        recorded_evs = events[
            model.recorded[events]
            & ~model.adjoint[events]
            & (model.phase[events] == S.FORWARD)
            & (model.kind[events] == K[S.LAUNCH])
        ]
        recorded_seqs = model.seq[recorded_evs]
        for begin in tape.backward_begins:
            losses = losses_of[begin]
            if not losses:
                continue
            reset_index = bisect.bisect_left(tape.resets, begin)
            start = tape.resets[reset_index - 1] if reset_index else -1
            last_write_ev = _last_loss_write(model, loss_writes.get(tape.tape_id), losses, start, begin)
            if last_write_ev < 0:
                continue  # the loss is not computed on this tape (another rule's business)
            lo = int(np.searchsorted(recorded_seqs, model.seq[last_write_ev], side="right"))
            hi = int(np.searchsorted(recorded_seqs, begin, side="left"))
            begin_ev = model.ev_of_seq(begin)
            for ev in recorded_evs[lo:hi].tolist():
                post_loss.setdefault(ev, (last_write_ev, begin_ev, losses[0]))
    return _without_other_heads(model, post_loss)


def _without_other_heads(
    model: Model, post_loss: dict[int, tuple[int, int, int]]
) -> dict[int, tuple[int, int, int]]:
    """Drop the launches that feed what another backward call of the same recording differentiates."""
    if not post_loss:
        return post_loss
    df = dataflow_of(model)
    epochs = {int(df.ev_epoch[ev]) for ev in post_loss}
    feeding: set[int] = set()
    for call in df.backward_calls:
        if call.epoch in epochs:
            feeding |= df.objective_events(call)
    return {ev: found for ev, found in post_loss.items() if ev not in feeding}
