"""Dataflow over the trace: who wrote what each access read, backward calls, gradient state.

Derived once per analysis (``model.dataflow``) for the accumulation and flow rules:

- **def-use edges**: for every read access row, the write rows that produced the bytes
  it read (the nearest overlapping write, then earlier ones while the nearer writes
  only accumulate into or partly cover the read range). Computed with a sort and a
  binary search per allocation, stepping back a bounded number of writes: linear-ish
  in the number of access rows, never quadratic.
- **backward calls** (:class:`BackwardCall`) with the events they ran, and **tape
  epochs**: a tape between two ``tape.reset()`` calls is one recording; every recorded
  event belongs to one epoch and is replayed by the epoch's backward calls.
- **gradient state over time**: whether an array object has a ``.grad`` at a given
  seq (``requires_grad`` at registration, then ``set_requires_grad``/``set_grad``
  events), whether it keeps its gradient (``retain_grad``), which array is its
  ``.grad`` then, and whose gradient a grad buffer is.
- **provenance**: for every recorded forward event, the differentiable leaves
  (arrays with a gradient that no recorded event produced: parameters, initial
  states) whose values flowed into it along recorded launches and copies.

Everything is computed from the model's numpy columns; nothing imports Warp.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from warptrace.trace import schema as S

if TYPE_CHECKING:
    from warptrace.analysis.model import Model

# How many earlier writes a read steps over (per read) before the exact fallback.
_STEP_LIMIT = 24
# How many earlier writes the exact fallback scans per read (bounds pathological cases).
_SCAN_LIMIT = 4096
# How many producers a read keeps (the nearest ones).
_PRODUCER_LIMIT = 8


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


@dataclass
class FillGroups:
    """Per gradient memory filled by backward calls (see :attr:`Dataflow.fill_groups`), in order of
    first fill: its (alloc, lo, hi), its first fill row and first fill row made by an adjoint launch
    (-1 when none); ``calls[cuts[g]:cuts[g + 1]]`` are the calls filling memory ``g``."""

    alloc: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    first_row: np.ndarray
    adjoint_row: np.ndarray
    cuts: np.ndarray
    calls: np.ndarray


class Dataflow:
    """Def-use edges, backward calls, tape epochs, gradient state and provenance of one model."""

    def __init__(self, model: Model) -> None:
        from warptrace.analysis.model import K

        self.model = model
        m = model
        n_rows = len(m.acc_seq)
        # event index of each access row
        self.acc_ev = m.acc_first_ev()
        np.minimum(self.acc_ev, max(m.n_events - 1, 0), out=self.acc_ev)
        # byte hull of each access row within its allocation
        max_id = max(m.arrays, default=-1)
        lo_of = np.zeros(max_id + 2, dtype=np.int64)
        hi_of = np.zeros(max_id + 2, dtype=np.int64)
        for info in m.arrays.values():
            lo_of[info.array_id], hi_of[info.array_id] = info.hull
        ids = np.clip(m.acc_array, -1, max_id + 1)
        self.acc_lo = np.where(ids >= 0, lo_of[ids], 0)
        self.acc_hi = np.where(ids >= 0, hi_of[ids], 0)
        role = m.acc_role
        self.is_read = (role & S.ROLE_READ) != 0
        self.is_write = (role & S.ROLE_WRITE) != 0
        flags = m.acc_flags
        self.is_accumulate = (flags & S.FLAG_ACCUMULATE) != 0
        self.is_store = self.is_write & ~self.is_accumulate
        # the recorder could not analyse the kernel: every argument is marked read and stored
        self.is_uncertain = (flags & S.FLAG_UNCERTAIN) != 0
        executed = m.executed[self.acc_ev] if n_rows else np.zeros(0, dtype=bool)
        self._exec = executed
        self._K = K

        self._build_edges()
        self._build_tapes()
        self._build_grad_state()

    @cached_property
    def dims(self) -> np.ndarray:
        """Launch ``dim`` string of each event (None when null), as an object array."""
        return np.array(self.model._dim.to_pylist(), dtype=object)

    # ------------------------------------------------------------ def-use
    def _build_edges(self) -> None:
        m = self.model
        valid = (m.acc_alloc >= 0) & self._exec
        writes = np.nonzero(self.is_write & valid)[0]
        reads = np.nonzero(self.is_read & valid)[0]
        big = int(m.seq.max()) + 2 if m.n_events else 2
        self._big = big
        wkey = m.acc_alloc[writes] * big + m.acc_seq[writes]
        order = np.argsort(wkey, kind="stable")
        self.w_rows = writes[order]  # write rows sorted by (alloc, seq)
        self.w_key = wkey[order]
        self.w_alloc = m.acc_alloc[self.w_rows]
        self.w_seq = m.acc_seq[self.w_rows]
        self.w_lo = self.acc_lo[self.w_rows]
        self.w_hi = self.acc_hi[self.w_rows]
        self.w_store = self.is_store[self.w_rows]
        stores = np.nonzero(self.w_store)[0]  # plain-store writes only, same order
        self.s_key = self.w_key[stores]
        self.s_rows, self.s_lo, self.s_hi = self.w_rows[stores], self.w_lo[stores], self.w_hi[stores]

        readers, writers = self._writers_for(
            m.acc_alloc[reads], self.acc_lo[reads], self.acc_hi[reads], m.acc_seq[reads]
        )
        self.edge_reader = reads[readers]  # access row of the read
        self.edge_writer = writers  # access row of the write
        order = np.argsort(self.edge_reader, kind="stable")
        self.edge_reader = self.edge_reader[order]
        self.edge_writer = self.edge_writer[order]
        self.edge_reader_ev = self.acc_ev[self.edge_reader]
        self.edge_writer_ev = self.acc_ev[self.edge_writer]
        # edges of reader row r: _edge_start[r]:_edge_start[r + 1]
        self._edge_start = np.zeros(len(m.acc_seq) + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.edge_reader, minlength=len(m.acc_seq)), out=self._edge_start[1:])

    def _writers_for(
        self, alloc: np.ndarray, lo: np.ndarray, hi: np.ndarray, seq: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Def-use pairs (index into the query arrays, write row) for reads of [lo, hi) in ``alloc`` at ``seq``.

        Steps back from the nearest earlier write of the same allocation; an
        overlapping write is a producer; a plain store covering the whole range ends
        the search (nothing earlier is visible). At most ``_PRODUCER_LIMIT`` producers
        are kept per read: memory that is only ever accumulated into (a gradient, a
        running sum) would otherwise link every read to its whole history."""
        n = len(alloc)
        found_q: list[np.ndarray] = []
        found_w: list[np.ndarray] = []
        if n == 0 or len(self.w_key) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        pos = np.searchsorted(self.w_key, alloc * self._big + seq, side="left") - 1
        count = np.zeros(n, dtype=np.int64)
        active = np.arange(n)
        for _ in range(_STEP_LIMIT):
            if len(active) == 0:
                break
            p = pos[active]
            ok = p >= 0
            ok[ok] = self.w_alloc[p[ok]] == alloc[active[ok]]
            active, p = active[ok], p[ok]
            if len(active) == 0:
                break
            overlap = (self.w_lo[p] < hi[active]) & (lo[active] < self.w_hi[p])
            found_q.append(active[overlap])
            found_w.append(self.w_rows[p[overlap]])
            count[active[overlap]] += 1
            covers = overlap & self.w_store[p] & (self.w_lo[p] <= lo[active]) & (self.w_hi[p] >= hi[active])
            keep = ~covers & (count[active] < _PRODUCER_LIMIT)
            active = active[keep]
            pos[active] = p[keep] - 1
        for q in active.tolist():  # rare: long runs of writes to other parts of the allocation
            start = int(np.searchsorted(self.w_key, int(alloc[q]) * self._big, side="left"))
            stop = int(pos[q]) + 1
            start = max(start, stop - _SCAN_LIMIT)
            if stop <= start:
                continue
            window = slice(start, stop)
            overlap = (self.w_lo[window] < hi[q]) & (lo[q] < self.w_hi[window])
            covers = (
                overlap & self.w_store[window] & (self.w_lo[window] <= lo[q]) & (self.w_hi[window] >= hi[q])
            )
            idx = np.nonzero(overlap)[0]
            last_cover = np.nonzero(covers)[0]
            if len(last_cover):
                idx = idx[idx >= last_cover[-1]]
            idx = idx[max(0, len(idx) - (_PRODUCER_LIMIT - int(count[q]))) :]
            found_q.append(np.full(len(idx), q, dtype=np.int64))
            found_w.append(self.w_rows[start + idx])
        if not found_q:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.concatenate(found_q).astype(np.int64), np.concatenate(found_w).astype(np.int64)

    def writer_rows(self, row: int) -> np.ndarray:
        """Write rows that produced what access row ``row`` read (empty for writes or fresh memory)."""
        return self.edge_writer[self._edge_start[row] : self._edge_start[row + 1]]

    def rows_of_events(self, evs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The access rows of each event of ``evs`` in turn (``accesses_of``), and for each row the
        position in ``evs`` of its event."""
        m = self.model
        start, stop = m.acc_start[evs], m.acc_stop[evs]
        counts = stop - start
        offsets = np.cumsum(counts) - counts
        rows = np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(start - offsets, counts)
        return rows, np.repeat(np.arange(len(evs), dtype=np.int64), counts)

    def writer_events(self, ev: int) -> set[int]:
        """Events whose writes the reads of event ``ev`` saw."""
        m = self.model
        start, stop = int(m.acc_start[ev]), int(m.acc_stop[ev])
        a, b = int(self._edge_start[start]), int(self._edge_start[stop])
        return set(self.edge_writer_ev[a:b].tolist())

    def writers_of_memory(self, array_id: int, seq: int) -> list[int]:
        """Write rows visible to a read of the whole of ``array_id`` at ``seq`` (newest first)."""
        info = self.model.arrays.get(int(array_id))
        if info is None or info.alloc_id < 0:
            return []
        lo, hi = info.hull
        _, rows = self._writers_for(
            np.array([info.alloc_id]), np.array([lo]), np.array([hi]), np.array([seq])
        )
        return rows.tolist()

    def writes_between(self, array_id: int, after_seq: int, before_seq: int) -> np.ndarray:
        """Write rows overlapping ``array_id`` with after_seq < seq < before_seq, in time order."""
        info = self.model.arrays.get(int(array_id))
        if info is None or info.alloc_id < 0:
            return np.zeros(0, dtype=np.int64)
        lo, hi = info.hull
        base = info.alloc_id * self._big
        start = int(np.searchsorted(self.w_key, base + after_seq, side="right"))
        stop = int(np.searchsorted(self.w_key, base + before_seq, side="left"))
        if stop <= start:
            return np.zeros(0, dtype=np.int64)
        window = slice(start, stop)
        overlap = (self.w_lo[window] < hi) & (lo < self.w_hi[window])
        return self.w_rows[start + np.nonzero(overlap)[0]]

    def reads_between(self, array_id: int, after_seq: int, before_seq: int) -> np.ndarray:
        """Read rows overlapping ``array_id`` with after_seq < seq < before_seq, in time order."""
        m = self.model
        info = m.arrays.get(int(array_id))
        if info is None or info.alloc_id < 0:
            return np.zeros(0, dtype=np.int64)
        entry = self._read_rows_by_alloc.get(info.alloc_id)
        if entry is None:
            return np.zeros(0, dtype=np.int64)
        rows, seqs, lows, highs = entry
        start = int(np.searchsorted(seqs, after_seq, side="right"))
        stop = int(np.searchsorted(seqs, before_seq, side="left"))
        lo, hi = info.hull
        overlap = (lows[start:stop] < hi) & (lo < highs[start:stop])
        return rows[start:stop][overlap]

    def iter_writes(self, array_id: int, after_seq: int, before_seq: int | None = None) -> Iterator[int]:
        """Write rows overlapping ``array_id`` after ``after_seq`` (and before ``before_seq``), in time
        order, lazily: callers that stop at the first match cost O(log n + matches)."""
        info = self.model.arrays.get(int(array_id))
        if info is None or info.alloc_id < 0:
            return
        lo, hi = info.hull
        base = info.alloc_id * self._big
        start = int(np.searchsorted(self.w_key, base + after_seq, side="right"))
        stop_seq = self._big - 1 if before_seq is None else before_seq
        stop = int(np.searchsorted(self.w_key, base + stop_seq, side="left"))
        yield from self._chunked(start, stop, self.w_lo, self.w_hi, self.w_rows, lo, hi)

    def next_store(self, array_id: int, after_seq: int, before_seq: int | None = None) -> int:
        """The first plain-store write row (memset, copy, ``y[i] = ...``) overlapping ``array_id``
        after ``after_seq`` (before ``before_seq``), or -1. Skips accumulations in O(log n)."""
        info = self.model.arrays.get(int(array_id))
        if info is None or info.alloc_id < 0:
            return -1
        lo, hi = info.hull
        base = info.alloc_id * self._big
        start = int(np.searchsorted(self.s_key, base + after_seq, side="right"))
        stop_seq = self._big - 1 if before_seq is None else before_seq
        stop = int(np.searchsorted(self.s_key, base + stop_seq, side="left"))
        for row in self._chunked(start, stop, self.s_lo, self.s_hi, self.s_rows, lo, hi):
            return row
        return -1

    def write_index(self, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The write rows for which ``keep[row]`` holds, in :meth:`iter_writes` order (allocation,
        then seq): (keys, lo, hi, rows), for :meth:`first_writes`."""
        sel = np.nonzero(keep[self.w_rows])[0]
        return self.w_key[sel], self.w_lo[sel], self.w_hi[sel], self.w_rows[sel]

    def first_writes(
        self,
        index: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
        alloc: np.ndarray,
        lo: np.ndarray,
        hi: np.ndarray,
        after_seq: np.ndarray,
        before_seq: np.ndarray,
    ) -> np.ndarray:
        """Vectorized first match of :meth:`iter_writes` over a :meth:`write_index`: per query, the
        first write row of ``index`` overlapping bytes [lo, hi) of allocation ``alloc`` with
        after_seq < seq < before_seq, or -1 (always -1 where ``alloc`` < 0)."""
        keys, lows, highs, rows = index
        n = len(alloc)
        found = np.full(n, -1, dtype=np.int64)
        if n == 0 or len(keys) == 0:
            return found
        base = alloc * self._big
        pos = np.searchsorted(keys, base + after_seq, side="right")
        stop = np.searchsorted(keys, base + before_seq, side="left")
        active = np.nonzero((pos < stop) & (alloc >= 0))[0]
        for _ in range(_STEP_LIMIT):
            if len(active) == 0:
                break
            p = pos[active]
            hit = (lows[p] < hi[active]) & (lo[active] < highs[p])
            found[active[hit]] = rows[p[hit]]
            active = active[~hit]
            pos[active] += 1
            active = active[pos[active] < stop[active]]
        for q in active.tolist():  # rare: long runs of writes to other parts of the allocation
            start, end = int(pos[q]), int(stop[q])
            hits = np.nonzero((lows[start:end] < hi[q]) & (lo[q] < highs[start:end]))[0]
            if len(hits):
                found[q] = rows[start + hits[0]]
        return found

    def iter_reads(self, array_id: int, after_seq: int, before_seq: int | None = None) -> Iterator[int]:
        """Read rows overlapping ``array_id`` after ``after_seq`` (and before ``before_seq``), lazily."""
        m = self.model
        info = m.arrays.get(int(array_id))
        if info is None or info.alloc_id < 0:
            return
        entry = self._read_rows_by_alloc.get(info.alloc_id)
        if entry is None:
            return
        rows, seqs, lows, highs = entry
        start = int(np.searchsorted(seqs, after_seq, side="right"))
        stop = len(rows) if before_seq is None else int(np.searchsorted(seqs, before_seq, side="left"))
        lo, hi = info.hull
        yield from self._chunked(start, stop, lows, highs, rows, lo, hi)

    @staticmethod
    def _chunked(
        start: int, stop: int, lows: np.ndarray, highs: np.ndarray, rows: np.ndarray, lo: int, hi: int
    ) -> Iterator[int]:
        size = 64
        while start < stop:
            end = min(stop, start + size)
            window = slice(start, end)
            hits = np.nonzero((lows[window] < hi) & (lo < highs[window]))[0]
            yield from (int(r) for r in rows[start + hits])
            start = end
            size = min(size * 4, 1 << 16)

    @cached_property
    def _read_rows_by_alloc(self) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """alloc -> (read rows, their seqs, lo, hi), in time order."""
        m = self.model
        rows = np.nonzero(self.is_read & (m.acc_alloc >= 0))[0]
        order = np.argsort(m.acc_alloc[rows], kind="stable")
        rows = rows[order]
        allocs = m.acc_alloc[rows]
        table: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        if len(rows):
            cuts = np.nonzero(np.diff(allocs))[0] + 1
            for chunk in np.split(rows, cuts):
                table[int(m.acc_alloc[chunk[0]])] = (
                    chunk,
                    m.acc_seq[chunk],
                    self.acc_lo[chunk],
                    self.acc_hi[chunk],
                )
        return table

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
                grads = [int(g) for g in detail.get("grads", detail.get("keys", []))]
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

    # ------------------------------------------------------------ gradient state
    def _build_grad_state(self) -> None:
        m = self.model
        K = self._K
        # array_id -> [(seq, has_grad)] changes; array_id -> [(seq, grad array id)]
        self._has_grad: dict[int, list[tuple[int, bool]]] = {}
        self._retain: dict[int, list[tuple[int, bool]]] = {}
        self._grad_ids: dict[int, list[tuple[int, int]]] = {}
        self.grad_owner: dict[int, int] = {}  # grad array id -> owner array id
        for info in m.arrays.values():
            if info.grad_of >= 0:
                self.grad_owner[info.array_id] = info.grad_of
                self._grad_ids.setdefault(info.grad_of, []).append((info.seq, info.array_id))
                # a registered .grad means the owner has one from then on, whatever the owner's
                # requires_grad column says (``wp.array(data, requires_grad=True)`` registers the
                # owner before the flag is set)
                self._has_grad.setdefault(info.grad_of, []).append((info.seq, True))
        events = np.nonzero(np.isin(m.kind, [K[S.SET_REQUIRES_GRAD], K[S.SET_RETAIN_GRAD], K[S.SET_GRAD]]))[0]
        for ev in events.tolist():
            kind = m.kind[ev]
            array_id = int(m.array_id[ev])
            seq = int(m.seq[ev])
            if kind == K[S.SET_REQUIRES_GRAD]:
                value = bool(m.value[ev]) if not np.isnan(m.value[ev]) else True
                self._has_grad.setdefault(array_id, []).append((seq, value))
            elif kind == K[S.SET_RETAIN_GRAD]:
                value = bool(m.value[ev]) if not np.isnan(m.value[ev]) else True
                self._retain.setdefault(array_id, []).append((seq, value))
            else:
                ref = int(m.ref_id[ev])
                self._has_grad.setdefault(array_id, []).append((seq, ref >= 0))
                self._grad_ids.setdefault(array_id, []).append((seq, ref))
                if ref >= 0:
                    self.grad_owner.setdefault(ref, array_id)
        for changes in (*self._has_grad.values(), *self._retain.values(), *self._grad_ids.values()):
            changes.sort()

    @staticmethod
    def _at(changes: list[tuple[int, object]] | None, seq: int, initial: object) -> object:
        if not changes:
            return initial
        i = _bisect_seq(changes, seq)
        return changes[i - 1][1] if i > 0 else initial

    def has_grad(self, array_id: int, seq: int) -> bool:
        """Whether array object ``array_id`` has a ``.grad`` at ``seq`` (a backward would write one)."""
        info = self.model.arrays.get(int(array_id))
        initial = bool(info.requires_grad) if info else False
        return bool(self._at(self._has_grad.get(int(array_id)), seq, initial))

    def grad_since(self, array_id: int, never: int) -> int:
        """The first seq from which :meth:`has_grad` is true at every seq (``-2**63`` when
        always; ``never`` when it ends false)."""
        info = self.model.arrays.get(int(array_id))
        state = bool(info.requires_grad) if info else False
        changes = self._has_grad.get(int(array_id)) or []
        since = np.iinfo(np.int64).min if state else never
        for seq, value in changes:  # sorted: the last change at or before a seq decides
            if value and not state:
                since = seq
            elif not value:
                since = never
            state = bool(value)
        return since

    def retains_grad(self, array_id: int, seq: int) -> bool:
        info = self.model.arrays.get(int(array_id))
        initial = bool(info.retain_grad) if info else False
        return bool(self._at(self._retain.get(int(array_id)), seq, initial))

    def grad_array(self, array_id: int, seq: int) -> int:
        """The array object that is ``array_id``'s ``.grad`` at ``seq`` (-1 when none)."""
        if not self.has_grad(array_id, seq):
            return -1
        grad = self._at(self._grad_ids.get(int(array_id)), seq, -1)
        if grad == -1:  # registered after seq (e.g. lazily): take the first one
            changes = self._grad_ids.get(int(array_id))
            grad = changes[0][1] if changes else -1
        return int(grad)

    def owner_of(self, grad_id: int) -> int:
        """Whose gradient the array object ``grad_id`` is (following views up to a grad); -1."""
        m = self.model
        seen = 0
        current = int(grad_id)
        while current >= 0 and seen < 64:
            if current in self.grad_owner:
                return self.grad_owner[current]
            info = m.arrays.get(current)
            if info is None:
                return -1
            current = info.base_id
            seen += 1
        return -1

    @cached_property
    def grad_row_mask(self) -> np.ndarray:
        """Access rows touching a gradient buffer."""
        m = self.model
        mask = (m.acc_flags & S.FLAG_GRAD) != 0
        grad_ids = {a for a in m.arrays if m.is_grad_array(a)} | set(self.grad_owner)
        if grad_ids:
            mask |= np.isin(m.acc_array, np.fromiter(grad_ids, dtype=np.int64))
        return mask

    # ------------------------------------------------------------ what backward calls fill
    @cached_property
    def fill_rows(self) -> np.ndarray:
        """Access rows by which a backward call adds gradient into a ``.grad`` buffer: adjoint
        accumulations, and read-modify-write stores such as the copy adjoint's ``a = a + b``
        (a launch inside the backward that reads the gradient memory it overwrites)."""
        m = self.model
        K = self._K
        candidates = (
            self.grad_row_mask
            & self.is_write
            & (m.phase[self.acc_ev] == S.BACKWARD)
            & (m.kind[self.acc_ev] == K[S.LAUNCH])
            & (m.acc_alloc >= 0)
        )
        accumulating = candidates & self.is_accumulate
        for row in np.nonzero(candidates & ~self.is_accumulate & ~m.adjoint[self.acc_ev])[0].tolist():
            ev = int(self.acc_ev[row])
            for other in range(int(m.acc_start[ev]), int(m.acc_stop[ev])):
                if (
                    self.is_read[other]
                    and m.acc_alloc[other] == m.acc_alloc[row]
                    and self.acc_lo[other] < self.acc_hi[row]
                    and self.acc_lo[row] < self.acc_hi[other]
                ):
                    accumulating[row] = True
                    break
        return np.nonzero(accumulating)[0]

    @cached_property
    def grad_fills(self) -> dict[tuple[int, int, int], list[int]]:
        """Gradient memory (alloc, lo, hi) -> backward call indexes whose adjoint launches
        accumulate into it, in time order (the loss seed and consumption are not fills)."""
        groups = self.fill_groups
        calls = groups.calls.tolist()
        cuts = groups.cuts.tolist()
        return {
            (alloc, lo, hi): calls[cuts[g] : cuts[g + 1]]
            for g, (alloc, lo, hi) in enumerate(
                zip(groups.alloc.tolist(), groups.lo.tolist(), groups.hi.tolist())
            )
        }

    @cached_property
    def fill_groups(self) -> FillGroups:
        """:attr:`grad_fills` as numpy columns: the fill rows run by a backward call, grouped by
        gradient memory (alloc, lo, hi) in order of first fill; per memory, the calls filling it in
        row order with repeats of the same call in a row dropped."""
        m = self.model
        rows = self.fill_rows
        calls = self.ev_backward[self.acc_ev[rows]]
        keep = calls >= 0
        rows, calls = rows[keep], calls[keep]
        n = len(rows)
        alloc, lo, hi = m.acc_alloc[rows], self.acc_lo[rows], self.acc_hi[rows]
        order = np.lexsort((hi, lo, alloc))  # stable: each memory's rows stay in row order
        a, lo_s, hi_s, c = alloc[order], lo[order], hi[order], calls[order]
        new_group = np.ones(n, dtype=bool)
        new_group[1:] = (a[1:] != a[:-1]) | (lo_s[1:] != lo_s[:-1]) | (hi_s[1:] != hi_s[:-1])
        starts = np.nonzero(new_group)[0]
        group = np.cumsum(new_group) - 1  # group of each sorted position (groups in memory order)
        # number the groups by first fill (their first sorted position holds their first row)
        rank = np.empty(len(starts), dtype=np.int64)
        rank[np.argsort(order[starts], kind="stable")] = np.arange(len(starts))
        firsts = np.empty(len(starts), dtype=np.int64)
        firsts[rank] = starts
        kept = new_group.copy()
        kept[1:] |= c[1:] != c[:-1]
        kept = np.nonzero(kept)[0]
        kept = kept[np.argsort(rank[group[kept]], kind="stable")]
        cuts = np.searchsorted(rank[group[kept]], np.arange(len(starts) + 1), side="left")
        adjoint = np.nonzero(m.adjoint[self.acc_ev[rows[order]]])[0]
        adjoint_row = np.full(len(starts), -1, dtype=np.int64)
        if len(adjoint):
            adj_groups, first_adj = np.unique(group[adjoint], return_index=True)
            adjoint_row[rank[adj_groups]] = rows[order[adjoint[first_adj]]]
        return FillGroups(
            alloc=a[firsts],
            lo=lo_s[firsts],
            hi=hi_s[firsts],
            first_row=rows[order[firsts]],
            adjoint_row=adjoint_row,
            cuts=cuts,
            calls=c[kept],
        )

    def fills(self, array_id: int, call_index: int) -> bool:
        """Whether backward call ``call_index`` accumulated into ``array_id``."""
        calls = self._fill_info(array_id)[0]
        i = bisect.bisect_left(calls, call_index)
        return i < len(calls) and calls[i] == call_index

    def fills_before(self, array_id: int, seq: int) -> list[int]:
        """Indexes of the calls filling ``array_id`` that ended before ``seq`` (in time order)."""
        calls, ends, _zeros = self._fill_info(array_id)
        return calls[: bisect.bisect_left(ends, seq)]

    def zeroed_between(self, grad_id: int, after_seq: int, before_seq: int) -> bool:
        """Whether gradient buffer ``grad_id`` was cleared or overwritten in (after_seq, before_seq):
        a memset, copy or plain store outside any backward, or ``tape.zero()``/``tape.reset()`` of a
        tape whose backward had accumulated into it (``Tape.zero`` zeroes the gradients its
        backward calls looked up)."""
        m = self.model
        writes = self.writes_between(grad_id, after_seq, before_seq)
        if len(writes) and bool(np.any(self.is_store[writes] & (m.phase[self.acc_ev[writes]] == S.FORWARD))):
            return True
        zeros = self._fill_info(grad_id)[2]
        i = bisect.bisect_right(zeros, after_seq)
        return i < len(zeros) and zeros[i] < before_seq

    def _fill_info(self, array_id: int) -> tuple[list[int], list[int], list[int]]:
        """(filling call indexes, their end seqs, seqs of tape zero/reset events that clear it)."""
        info = self.model.arrays.get(int(array_id))
        if info is None or info.alloc_id < 0:
            return [], [], []
        key = (info.alloc_id, *info.hull)
        cached = self._fill_cache.get(key)
        if cached is not None:
            return cached
        lo, hi = info.hull
        found: set[int] = set()
        for (_alloc, key_lo, key_hi), indexes in self._fills_by_alloc.get(info.alloc_id, ()):
            if key_lo < hi and lo < key_hi:
                found.update(indexes)
        calls = sorted(found)
        ends = [self.backward_calls[i].end_seq for i in calls]
        first_by_tape: dict[int, int] = {}
        for i in calls:
            call = self.backward_calls[i]
            first_by_tape.setdefault(call.tape, call.begin_seq)
        zeros: list[int] = []
        for tape_id, first in first_by_tape.items():
            tape = self.model.tapes.get(tape_id)
            if tape is not None:
                zeros += [seq for seq in tape.zeros + tape.resets if seq > first]
        result = (calls, ends, sorted(zeros))
        self._fill_cache[key] = result
        return result

    @cached_property
    def _fill_cache(self) -> dict[tuple[int, int, int], tuple[list[int], list[int], list[int]]]:
        return {}

    @cached_property
    def _fills_by_alloc(self) -> dict[int, list[tuple[tuple[int, int, int], list[int]]]]:
        table: dict[int, list[tuple[tuple[int, int, int], list[int]]]] = {}
        for key, indexes in self.grad_fills.items():
            table.setdefault(key[0], []).append((key, indexes))
        return table

    # ------------------------------------------------------------ what a backward differentiates
    def first_adjoint_seq(self, call: BackwardCall) -> int:
        """Seq of the call's first adjoint launch (its end when it ran none)."""
        m = self.model
        stop = min(call.end_ev, m.n_events)
        adjoint = np.nonzero(m.adjoint[call.begin_ev : stop])[0]
        return int(m.seq[call.begin_ev + adjoint[0]]) if len(adjoint) else call.end_seq

    def seeds(self, call: BackwardCall) -> list[tuple[int, int, int, bool]]:
        """Hand seeds of a backward (cached): see :meth:`_find_seeds`."""
        cached = self._seed_cache.get(call.index)
        if cached is None:
            cached = self._seed_cache[call.index] = self._find_seeds(call)
        return cached

    @cached_property
    def _seed_cache(self) -> dict[int, list[tuple[int, int, int, bool]]]:
        return {}

    @cached_property
    def _objective_cache(self) -> dict[int, set[int]]:
        return {}

    def _find_seeds(self, call: BackwardCall) -> list[tuple[int, int, int, bool]]:
        """Hand seeds of a backward: (event, grad array id, owner array id, from_grad) for each
        gradient buffer given its final value by a copy/assign/fill/store between the previous
        backward call (or the epoch's first event) and the call's first adjoint launch, plus
        ``grads=`` entries (event = the backward_begin). ``from_grad`` is true when the value
        came from another gradient buffer (an adjoint handed over, as in checkpointing) rather
        than a constant. The automatic ``loss=`` seed is not included; zero fills are not seeds."""
        m = self.model
        previous_end = self.backward_calls[call.index - 1].end_seq if call.index > 0 else -1
        epoch = self.epochs[call.epoch]
        start = max(previous_end, int(m.seq[epoch.events[0]]) - 1 if epoch.events else -1)
        stop = self.first_adjoint_seq(call)
        i = int(np.searchsorted(m.acc_seq, start, side="right"))
        j = int(np.searchsorted(m.acc_seq, stop, side="left"))
        latest: dict[tuple[int, int, int], tuple[int, int, bool]] = {}
        for row in range(i, j):
            if not (self.is_write[row] and self.grad_row_mask[row]) or self.is_accumulate[row]:
                continue
            ev = int(self.acc_ev[row])
            if m.adjoint[ev]:
                continue
            is_seed = not (m.kind[ev] == self._K[S.MEMSET] and (np.isnan(m.value[ev]) or m.value[ev] == 0.0))
            if call.loss >= 0 and self.owner_of(int(m.acc_array[row])) == call.loss:
                continue  # the loss= seed
            key = (int(m.acc_alloc[row]), int(self.acc_lo[row]), int(self.acc_hi[row]))
            latest[key] = (ev, int(m.acc_array[row]), is_seed)
        found = []
        by_grad: dict[int, tuple[int, bool]] = {}
        for ev, grad_id, is_seed in latest.values():
            if is_seed:
                from_grad = self._carries_gradient(ev)
                by_grad[grad_id] = (ev, from_grad)
                if ev > call.begin_ev and m.phase[ev] == S.BACKWARD:
                    continue  # a grads= assign: reported with its key below
                found.append((ev, grad_id, self.owner_of(grad_id), from_grad))
        for array_id in call.grads:
            grad_id = self.grad_array(array_id, call.begin_seq)
            from_grad = by_grad.get(grad_id, (0, False))[1]
            if grad_id < 0 or grad_id not in by_grad:
                adopted = self._adopted_grad(array_id, call)
                grad_id = adopted if adopted >= 0 else grad_id
                from_grad = adopted >= 0 and self.owner_of(adopted) not in (-1, array_id)
            found.append((call.begin_ev, grad_id, array_id, from_grad))
        return found

    def _carries_gradient(self, ev: int) -> bool:
        """Whether the values event ``ev`` writes are an adjoint handed over: it reads a gradient
        buffer, or reads memory whose last writer read one or was an adjoint launch (a gradient
        saved in a plain buffer between checkpoint segments, a hand-run loss adjoint)."""
        m = self.model
        rows = range(int(m.acc_start[ev]), int(m.acc_stop[ev]))
        if any(self.is_read[r] and self.grad_row_mask[r] for r in rows):
            return True
        for r in rows:
            if not self.is_read[r]:
                continue
            for writer_row in self.writers_of_memory(int(m.acc_array[r]), int(m.seq[ev])):
                writer = int(self.acc_ev[writer_row])
                if m.adjoint[writer] or any(
                    self.is_read[w] and self.grad_row_mask[w]
                    for w in range(int(m.acc_start[writer]), int(m.acc_stop[writer]))
                ):
                    return True
                break  # only the newest writer decides what the buffer holds
        return False

    def _adopted_grad(self, array_id: int, call: BackwardCall) -> int:
        """The array ``grads=`` made ``array_id``'s .grad inside the call (set_grad), or -1."""
        changes = self._grad_ids.get(int(array_id), [])
        for seq, grad_id in changes:
            if call.begin_seq <= seq <= call.end_seq:
                return int(grad_id)
        return -1

    def objective_events(self, call: BackwardCall) -> set[int]:
        """Recorded events of the call's epoch whose results reach what the backward
        differentiates (the loss, ``grads=`` keys, hand-seeded outputs): a backward slice
        along def-use edges inside the epoch (cached per call)."""
        cached = self._objective_cache.get(call.index)
        if cached is None:
            cached = self._objective_cache[call.index] = self._slice(call)
        return cached

    def _slice(self, call: BackwardCall) -> set[int]:
        targets = [call.loss] if call.loss >= 0 else []
        targets += [owner for _, _, owner, _ in self.seeds(call) if owner >= 0]
        work: list[int] = []
        for array_id in targets:
            for row in self.writers_of_memory(array_id, call.begin_seq):
                ev = int(self.acc_ev[row])
                if self.ev_epoch[ev] == call.epoch:
                    work.append(ev)
        reached: set[int] = set()
        while work:
            ev = work.pop()
            if ev in reached:
                continue
            reached.add(ev)
            for writer in self.writer_events(ev):
                if self.ev_epoch[writer] == call.epoch and writer not in reached:
                    work.append(writer)
        return reached

    # ------------------------------------------------------------ provenance
    def root_array(self, array_id: int) -> int:
        """The owning array object of a view (the object the user allocated)."""
        m = self.model
        current = int(array_id)
        for _ in range(64):
            info = m.arrays.get(current)
            if info is None or info.base_id < 0 or info.base_id not in m.arrays:
                return current
            current = info.base_id
        return current

    @cached_property
    def provenance(self) -> dict[int, frozenset[int]]:
        """For each recorded forward event (and unrecorded copies inside a tape scope): the
        differentiable leaves whose values reached it through recorded events.

        A read of an array that has a ``.grad`` (at the backward that replays the event)
        and that no recorded event produced is a leaf: a parameter or an initial state.
        Values flow from writer to reader along def-use edges between recorded events,
        across tapes too (state carried from one tape to the next keeps its leaves)."""
        m = self.model
        K = self._K
        prov: dict[int, frozenset[int]] = {}
        scope = m.recorded | ((m.kind == K[S.COPY]) & (m.tape >= 0))
        scope &= (m.phase == S.FORWARD) & ~m.adjoint & (m.parent < 0)
        empty: frozenset[int] = frozenset()
        interned: dict[frozenset[int], frozenset[int]] = {empty: empty}
        scope_evs = np.nonzero(scope)[0]
        if len(scope_evs) == 0:
            return prov
        # when each event is replayed (the seq its leaves' gradients are looked up at)
        when_of: dict[tuple[int, int], int] = {}
        whens = np.empty(len(scope_evs), dtype=np.int64)
        for i, ev in enumerate(scope_evs.tolist()):
            seq = int(m.seq[ev])
            if m.recorded[ev]:
                uid = int(self.ev_epoch[ev])
                cache_key = (uid, seq)
                when = when_of.get(cache_key)
                if when is None:
                    call = self.backward_of_event(ev)
                    when = when_of[cache_key] = call.begin_seq if call else seq
            else:
                when = seq
            whens[i] = when
        rows, index = self.rows_of_events(scope_evs)
        read = self.is_read[rows]
        rows, index = rows[read], index[read]
        # producers: def-use edges from an earlier in-scope event (already in prov)
        starts, stops = self._edge_start[rows], self._edge_start[rows + 1]
        counts = stops - starts
        offsets = np.cumsum(counts) - counts
        edges = np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(starts - offsets, counts)
        edge_row = np.repeat(np.arange(len(rows), dtype=np.int64), counts)
        writer_ev = self.edge_writer_ev[edges]
        reader_ev = scope_evs[index[edge_row]]
        live = scope[writer_ev] & (writer_ev < reader_ev)
        produced = np.zeros(len(rows), dtype=bool)
        produced[edge_row[live]] = True
        live_index = index[edge_row[live]]
        live_writer = writer_ev[live]
        # leaves: unproduced reads of arrays with a gradient, not of a gradient buffer
        cand = ~produced & ~self.grad_row_mask[rows]
        leaf = np.zeros(len(rows), dtype=bool)
        if np.any(cand):
            leaf[cand] = self.has_grad_many(m.acc_array[rows[cand]], whens[index[cand]])
        leaf_index = index[leaf]
        leaf_array = m.acc_array[rows[leaf]]
        roots: dict[int, int] = {}
        n = len(scope_evs)
        w_cut = np.searchsorted(live_index, np.arange(n + 1), side="left").tolist()
        l_cut = np.searchsorted(leaf_index, np.arange(n + 1), side="left").tolist()
        writers_list = live_writer.tolist()
        leaves_list = leaf_array.tolist()
        unions: dict[tuple, frozenset[int]] = {}
        for i, ev in enumerate(scope_evs.tolist()):
            parts = {id(p): p for p in (prov[w] for w in writers_list[w_cut[i] : w_cut[i + 1]])}
            own = leaves_list[l_cut[i] : l_cut[i + 1]]
            if own:
                own_set = set()
                for array_id in own:
                    root = roots.get(array_id)
                    if root is None:
                        root = roots[array_id] = self.root_array(array_id)
                    own_set.add(root)
                leaves: set[int] = set(own_set)
                for part in parts.values():
                    leaves |= part
                key = frozenset(leaves)
                prov[ev] = interned.setdefault(key, key)
                continue
            if not parts:
                prov[ev] = empty
                continue
            if len(parts) == 1:
                prov[ev] = next(iter(parts.values()))
                continue
            ukey = tuple(sorted(parts))
            cached = unions.get(ukey)
            if cached is None:
                union: set[int] = set()
                for part in parts.values():
                    union |= part
                key = frozenset(union)
                cached = unions[ukey] = interned.setdefault(key, key)
            prov[ev] = cached
        return prov

    @cached_property
    def _grad_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Flattened has-grad change lists: (sorted array ids, their segment starts and stops,
        change seqs, change values, initial state per dense array slot)."""
        m = self.model
        ids = sorted(self._has_grad)
        starts, stops, seqs, values = [], [], [], []
        for array_id in ids:
            changes = self._has_grad[array_id]
            starts.append(len(seqs))
            seqs += [seq for seq, _ in changes]
            values += [bool(v) for _, v in changes]
            stops.append(len(seqs))
        max_id = max(m.arrays, default=-1)
        initial = np.zeros(max(max_id, -1) + 2, dtype=bool)
        for info in m.arrays.values():
            if info.array_id >= 0:
                initial[info.array_id] = bool(info.requires_grad)
        return (
            np.asarray(ids, dtype=np.int64),
            np.asarray(starts, dtype=np.int64),
            np.asarray(stops, dtype=np.int64),
            np.asarray(seqs, dtype=np.int64),
            np.asarray(values, dtype=bool),
            initial,
        )

    def has_grad_many(self, array_ids: np.ndarray, seqs: np.ndarray) -> np.ndarray:
        """:meth:`has_grad` of each (array id, seq) pair, vectorized."""
        array_ids = np.asarray(array_ids, dtype=np.int64)
        seqs = np.asarray(seqs, dtype=np.int64)
        out = np.zeros(len(array_ids), dtype=bool)
        if len(array_ids) == 0:
            return out
        ids, starts, stops, ch_seq, ch_val, initial = self._grad_table
        max_slot = len(initial) - 1
        dense = (array_ids >= 0) & (array_ids < max_slot)
        out[dense] = initial[array_ids[dense]]
        # ids outside the dense table: the exact test
        for i in np.nonzero(~dense)[0].tolist():
            out[i] = self.has_grad(int(array_ids[i]), int(seqs[i]))
        if len(ids) == 0:
            return out
        rank = np.searchsorted(ids, array_ids)
        rank_c = np.minimum(rank, len(ids) - 1)
        hit = dense & (ids[rank_c] == array_ids)
        if not np.any(hit):
            return out
        q = np.nonzero(hit)[0]
        r = rank_c[q]
        s = seqs[q]
        # per query: number of changes of its array with seq <= query seq
        seg_rank = np.repeat(np.arange(len(ids), dtype=np.int64), stops - starts)
        low = min(int(ch_seq.min()), int(s.min())) if len(ch_seq) else int(s.min())
        high = max(int(ch_seq.max()), int(s.max())) if len(ch_seq) else int(s.max())
        span = high - low + 2
        keys = seg_rank * span + (ch_seq - low)
        pos = np.searchsorted(keys, r * span + (s - low), side="right") - 1
        changed = pos >= starts[r]
        out[q[changed]] = ch_val[pos[changed]]
        return out


def combine_codes(columns: list[np.ndarray]) -> np.ndarray:
    """One non-negative int64 code per position of equally long integer columns: equal codes
    <=> equal values in every column."""
    if len(columns[0]) == 0:
        return np.zeros(0, dtype=np.int64)
    columns = [np.asarray(column, dtype=np.int64) for column in columns]
    columns = [column - int(column.min()) for column in columns]
    radix = [int(column.max()) + 1 for column in columns]
    if float(np.prod(np.asarray(radix, dtype=np.float64))) < 2.0**62:
        codes = columns[0]
        for column, size in zip(columns[1:], radix[1:]):
            codes = codes * size + column
        return codes
    return np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)


def _bisect_seq(changes: list[tuple[int, object]], seq: int) -> int:
    """Number of changes with change seq <= seq."""
    lo, hi = 0, len(changes)
    while lo < hi:
        mid = (lo + hi) // 2
        if changes[mid][0] <= seq:
            lo = mid + 1
        else:
            hi = mid
    return lo
