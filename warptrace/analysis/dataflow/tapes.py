"""Backward calls (:class:`BackwardCall`) with the events they ran, and tape epochs
(:class:`Epoch`): a tape between two ``tape.reset()`` calls is one recording; every recorded
event belongs to one epoch and is replayed by the epoch's backward calls."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from warptrace.analysis.dataflow.base import narrowest
from warptrace.analysis.dataflow.replayed import ReplayedDefUse
from warptrace.trace import schema as S


@dataclass
class BackwardCall:
    """One ``tape.backward(...)`` call and what it covers."""

    index: int  # position among backward calls, in time order
    tape: int
    epoch: int  # tape epoch uid it replays (see Dataflow.epochs)
    begin_ev: int
    end_ev: int  # event index of backward_end (n_events when the run stopped inside it)
    begin_seq: int
    end_seq: int
    loss: int  # array_id of loss=, -1 when none
    grads: list[int] = field(default_factory=list)  # array_ids given in grads=
    site: int = -1


@dataclass
class Epoch:
    """A tape's recording between resets: the launches and copies one backward replays."""

    uid: int
    tape: int
    number: int  # how many resets of this tape came before
    events: list[int] = field(default_factory=list)  # recorded forward event indexes, in order
    backwards: list[int] = field(default_factory=list)  # BackwardCall.index values replaying it


class Tapes(ReplayedDefUse):
    """Backward calls (:class:`BackwardCall`) with the events they ran, and tape epochs"""

    # ------------------------------------------------------------ tapes and backward calls
    def _build_tapes(self) -> None:
        m = self.model
        K = self._K
        self.epochs: list[Epoch] = []
        self.ev_epoch = np.full(m.n_events, -1, dtype=np.int64)
        epoch_uid: dict[tuple[int, int], int] = {}

        def uid_of(tape_id: int, seq: int) -> int:
            tape = m.tapes.get(tape_id)
            number = bisect.bisect_left(tape.resets, seq) if tape else 0
            key = (tape_id, number)
            if key not in epoch_uid:
                epoch_uid[key] = len(self.epochs)
                self.epochs.append(Epoch(uid=len(self.epochs), tape=tape_id, number=number))
            return epoch_uid[key]

        forward_recorded = np.nonzero(
            m.recorded & (m.phase == S.FORWARD) & (m.tape >= 0) & ~m.adjoint & (m.parent < 0)
        )[0]
        if len(forward_recorded):
            # the epoch (tape, resets of that tape before the event) of every recorded forward event;
            # epochs numbered in order of their first event
            tape_ids = m.tape[forward_recorded]
            seqs = m.seq[forward_recorded]
            tapes, tape_index = np.unique(tape_ids, return_inverse=True)
            tape_index = tape_index.reshape(-1).astype(np.int64)
            numbers = np.zeros(len(forward_recorded), dtype=np.int64)
            reset_tapes = [i for i, t in enumerate(tapes.tolist()) if t in m.tapes and m.tapes[t].resets]
            if reset_tapes:
                # per tape, the number of its resets before the event (bisect_left): one sorted key array
                resets = [np.asarray(m.tapes[int(tapes[i])].resets, dtype=np.int64) for i in reset_tapes]
                low = min(int(seqs.min()), *(int(r.min()) for r in resets))
                high = max(int(seqs.max()), *(int(r.max()) for r in resets))
                span = high - low + 2
                reset_keys = np.sort(
                    np.concatenate([i * span + (r - low) for i, r in zip(reset_tapes, resets)])
                )
                base = tape_index * span
                numbers = np.searchsorted(reset_keys, base + (seqs - low), side="left") - np.searchsorted(
                    reset_keys, base, side="left"
                )
            keys = tape_index * (int(numbers.max()) + 1) + numbers
            _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
            inverse = inverse.reshape(-1)
            rank = np.empty(len(first), dtype=np.int64)
            by_first = np.argsort(first, kind="stable")
            rank[by_first] = np.arange(len(first))
            uids = rank[inverse]
            self.ev_epoch[forward_recorded] = uids
            order = np.argsort(uids, kind="stable")
            cuts = np.searchsorted(uids[order], np.arange(len(first) + 1), side="left").tolist()
            grouped = forward_recorded[order]
            for uid, index in enumerate(first[by_first].tolist()):
                tape_id, number = int(tape_ids[index]), int(numbers[index])
                epoch_uid[(tape_id, number)] = uid
                epoch = Epoch(uid=uid, tape=tape_id, number=number)
                epoch.events = grouped[cuts[uid] : cuts[uid + 1]].tolist()
                self.epochs.append(epoch)

        self.backward_calls: list[BackwardCall] = []
        begins = np.nonzero(m.kind == K[S.BACKWARD_BEGIN])[0].tolist()
        ends = np.nonzero(m.kind == K[S.BACKWARD_END])[0].tolist()
        ends_by_tape: dict[int, list[int]] = {}
        for ev in ends:
            ends_by_tape.setdefault(int(m.tape[ev]), []).append(ev)
        # backward call index of the events inside each backward call
        self.ev_backward = np.full(m.n_events, -1, dtype=np.int64)
        for ev in begins:
            tape_id = int(m.tape[ev])
            candidates = ends_by_tape.get(tape_id, [])
            i = bisect.bisect_right(candidates, ev)
            end_ev = candidates[i] if i < len(candidates) else m.n_events
            detail = m.detail(ev)
            grads = [int(g) for g in detail] if isinstance(detail, list) else []
            if isinstance(detail, dict):
                grads = [int(g) for g in detail.get("grads", detail.get("keys")) or []]
            call = BackwardCall(
                index=len(self.backward_calls),
                tape=tape_id,
                epoch=uid_of(tape_id, int(m.seq[ev])),
                begin_ev=ev,
                end_ev=end_ev,
                begin_seq=int(m.seq[ev]),
                end_seq=int(m.seq[end_ev]) if end_ev < m.n_events else int(m.seq[-1]) + 1,
                loss=int(m.array_id[ev]),
                grads=grads,
                site=int(m.site[ev]),
            )
            self.backward_calls.append(call)
            self.epochs[call.epoch].backwards.append(call.index)
            self.ev_backward[ev : min(end_ev + 1, m.n_events)] = call.index

    @cached_property
    def ev_epoch_narrow(self) -> np.ndarray:
        """:attr:`ev_epoch` in the smallest integer type that holds it (int16 up to 32,767 epochs;
        drone's 1,200: a quarter of int64's bytes), for the passes that gather it per def-use edge
        (drone: 4.9M edges). The same values; do not modify."""
        return narrowest(self.ev_epoch)

    def epoch_of(self, ev: int) -> Epoch | None:
        uid = int(self.ev_epoch[ev])
        return self.epochs[uid] if uid >= 0 else None

    def first_backward(self, epoch: Epoch | None, after_seq: int = -1) -> BackwardCall | None:
        """The first backward call replaying ``epoch`` (after ``after_seq``)."""
        if epoch is None:
            return None
        for index in epoch.backwards:
            call = self.backward_calls[index]
            if call.begin_seq > after_seq:
                return call
        return None

    def backward_of_event(self, ev: int) -> BackwardCall | None:
        """The backward call that will replay recorded event ``ev`` (None when never backpropagated)."""
        return self.first_backward(self.epoch_of(ev), int(self.model.seq[ev]))
