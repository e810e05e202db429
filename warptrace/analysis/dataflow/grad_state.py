"""Gradient state over time: whether an array object has a ``.grad`` at a given seq
(``requires_grad`` at registration, then ``set_requires_grad``/``set_grad`` events), whether it
keeps its gradient (``retain_grad``), which array is its ``.grad`` then, and whose gradient a
grad buffer is."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

import numpy as np

from warptrace.analysis.dataflow.base import bisect_seq, isin_ids
from warptrace.analysis.dataflow.tapes import Tapes
from warptrace.trace import schema as S


class GradState(Tapes):
    """Gradient state over time: whether an array object has a ``.grad`` at a given seq"""

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
        change_lists: list[list[Any]] = [
            *self._has_grad.values(),
            *self._retain.values(),
            *self._grad_ids.values(),
        ]
        for changes in change_lists:
            changes.sort()

    @staticmethod
    def _at(changes: Sequence[tuple[int, Any]] | None, seq: int, initial: Any) -> Any:
        if not changes:
            return initial
        i = bisect_seq(changes, seq)
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

    def static_grad(self, array_id: int) -> tuple[int, int] | None:
        """``(since, grad)`` where :meth:`grad_array` of ``array_id`` is ``grad`` at every seq from
        ``since`` on and -1 before (the array's gradient is switched on at most once and never
        replaced); None where it changes otherwise (``set_grad``, ``requires_grad`` turned off)."""
        changes = self._grad_ids.get(int(array_id), [])
        flags = self._has_grad.get(int(array_id), [])
        if len(changes) > 1 or not all(value for _, value in flags):
            return None
        info = self.model.arrays.get(int(array_id))
        grad = int(changes[0][1]) if changes else -1
        if info is not None and info.requires_grad:
            return int(np.iinfo(np.int64).min), grad
        if not flags:
            return int(np.iinfo(np.int64).min), -1  # never has a .grad
        return int(flags[0][0]), grad

    def grad_arrays_ever(self, array_id: int) -> list[int]:
        """Every array object that :meth:`grad_array` can return for ``array_id`` at some seq
        (-1 aside): the ``.grad`` objects ever registered or set for it."""
        return [int(ref) for _, ref in self._grad_ids.get(int(array_id), ()) if ref >= 0]

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
        # worked out where a graph replay does not copy an earlier one (a row's own array decides)
        decided = m.decided_rows
        mask = (m.acc_flags[decided] & S.FLAG_GRAD) != 0
        grad_ids = np.union1d(m.grad_array_ids, np.fromiter(self.grad_owner, dtype=np.int64))
        if len(grad_ids):
            mask |= isin_ids(m.acc_array[decided], grad_ids)
        if isinstance(decided, slice):
            return mask
        full = np.zeros(len(m.acc_seq), dtype=bool)
        full[decided] = mask
        m.fill_row_copies(full)
        return full

    @cached_property
    def _grad_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Flattened has-grad change lists: (sorted array ids, their segment starts and stops,
        change seqs, change values, initial state per dense array slot)."""
        m = self.model
        ids = sorted(self._has_grad)
        starts: list[int] = []
        stops: list[int] = []
        seqs: list[int] = []
        values: list[bool] = []
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

    @cached_property
    def _grad_keys(self) -> tuple[np.ndarray, int, int, int]:
        """Sorted keys ``segment * span + (seq - low)`` of the change lists, with ``low``,
        ``high`` and ``span``: built once, not per :meth:`has_grad_many` call (a rule asks
        once per finding, and rebuilding made the memory rule quadratic in the trace).

        A query seq is clipped into ``[low, high]`` first, which keeps the count of changes
        at or before it: ``low`` is one below the first change, ``high`` the last change.
        """
        _ids, starts, stops, ch_seq, _values, _initial = self._grad_table
        seg_rank = np.repeat(np.arange(len(starts), dtype=np.int64), stops - starts)
        low = int(ch_seq.min()) - 1 if len(ch_seq) else 0
        high = int(ch_seq.max()) if len(ch_seq) else 0
        span = high - low + 2
        return seg_rank * span + (ch_seq - low), low, high, span

    @cached_property
    def _grad_rank_of_slot(self) -> np.ndarray:
        """Per dense array slot of ``_grad_table``'s initial states: the rank of its id among the
        change lists' sorted ids, -1 for none (a lookup instead of a search per query)."""
        ids, _starts, _stops, _ch_seq, _values, initial = self._grad_table
        table = np.full(len(initial) - 1, -1, dtype=np.int64)
        slots = np.nonzero((ids >= 0) & (ids < len(table)))[0]
        table[ids[slots]] = slots
        return table

    @cached_property
    def _grad_since_of_slot(self) -> tuple[np.ndarray, np.ndarray]:
        """Per dense array slot of ``_grad_table``'s initial states: the seq from which
        :meth:`has_grad` is true (:meth:`grad_since`: int64 min when always, int64 max when
        never), and whether that is the answer at every seq (the gradient is never turned off
        once on); where it is not, the slot's initial state and the search decides."""
        _ids, _starts, _stops, _ch_seq, _values, initial = self._grad_table
        never, always = np.iinfo(np.int64).max, np.iinfo(np.int64).min
        since = np.where(initial[:-1], always, never)
        exact = np.ones(len(since), dtype=bool)
        for array_id, changes in self._has_grad.items():
            if not 0 <= array_id < len(since):
                continue
            state = bool(initial[array_id])
            for _, value in changes:  # sorted, as the search reads them
                if state and not value:
                    exact[array_id] = False
                state = bool(value)
            if exact[array_id]:
                since[array_id] = self.grad_since(array_id, never)
        return since, exact

    def has_grad_many(self, array_ids: np.ndarray, seqs: np.ndarray) -> np.ndarray:
        """:meth:`has_grad` of each (array id, seq) pair, vectorized."""
        array_ids = np.asarray(array_ids, dtype=np.int64)
        seqs = np.asarray(seqs, dtype=np.int64)
        out = np.zeros(len(array_ids), dtype=bool)
        if len(array_ids) == 0:
            return out
        ids, starts, _stops, _ch_seq, ch_val, initial = self._grad_table
        max_slot = len(initial) - 1
        dense = (array_ids >= 0) & (array_ids < max_slot)
        all_dense = bool(dense.all())
        slots = array_ids if all_dense else array_ids[dense]
        # a gradient never turned off once on: one comparison with the seq it is on from
        since, exact = self._grad_since_of_slot
        if all_dense:
            out = seqs >= since[slots]
        else:
            out[dense] = seqs[dense] >= since[slots]
        # ids outside the dense table: the exact test
        for i in np.nonzero(~dense)[0].tolist():
            out[i] = self.has_grad(int(array_ids[i]), int(seqs[i]))
        if len(ids) == 0 or bool(exact.all()):
            return out
        searched = ~exact[slots]
        # the other slots' queries: each one's rank among the change lists' ids, by the slot table
        q = np.nonzero(dense)[0][searched] if not all_dense else np.nonzero(searched)[0]
        r = self._grad_rank_of_slot[array_ids[q]]
        s = seqs[q]
        # per query: number of changes of its array with seq <= query seq
        keys, low, high, span = self._grad_keys
        pos = np.searchsorted(keys, r * span + (np.clip(s, low, high) - low), side="right") - 1
        changed = pos >= starts[r]
        out[q[changed]] = ch_val[pos[changed]]
        return out
