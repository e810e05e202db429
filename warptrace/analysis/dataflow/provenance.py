"""Provenance: for every recorded forward event, the differentiable leaves (arrays with a
gradient that no recorded event produced: parameters, initial states) whose values flowed
into it along recorded launches and copies."""

from __future__ import annotations

from functools import cached_property

import numpy as np

from warptrace.analysis.dataflow.base import expand_ranges
from warptrace.analysis.dataflow.seeds import Seeds
from warptrace.trace import schema as S


class Provenance(Seeds):
    """Provenance: for every recorded forward event, the differentiable leaves (arrays with a"""

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
        scope_evs = np.nonzero(scope)[0]
        if len(scope_evs) == 0:
            return prov
        # when each event is replayed (the seq its leaves' gradients are looked up at)
        whens = self._replay_seqs(scope_evs)
        rows, index = self.rows_of_events(scope_evs)
        read = self.is_read[rows]
        rows, index = rows[read], index[read]
        # producers: def-use edges from an earlier in-scope event (already in prov)
        edges, edge_row = expand_ranges(self._edge_start[rows], self._edge_start[rows + 1])
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
        # each distinct leaf set once (``sets``, interned), events carry its number: the
        # producers of an event are a set of small ints, not of frozensets
        sets: list[frozenset[int]] = [empty]
        number: dict[frozenset[int], int] = {empty: 0}
        set_of = [0] * n  # per scope position: the number of its event's leaf set
        writers_list = np.searchsorted(scope_evs, live_writer).tolist()  # as scope positions
        leaves_list = leaf_array.tolist()
        unions: dict[tuple[int, ...], int] = {}
        own_unions: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}
        for i in range(n):
            parts = {set_of[w] for w in writers_list[w_cut[i] : w_cut[i + 1]]}
            own = leaves_list[l_cut[i] : l_cut[i + 1]]
            if own:
                # the same reads and producers (a replayed launch) give the same leaves
                own_key = (tuple(own), tuple(sorted(parts)))
                cached = own_unions.get(own_key)
                if cached is not None:
                    set_of[i] = cached
                    continue
                own_set = set()
                for array_id in own:
                    root = roots.get(array_id)
                    if root is None:
                        root = roots[array_id] = self.root_array(array_id)
                    own_set.add(root)
                leaves: set[int] = set(own_set)
                for part in parts:
                    leaves |= sets[part]
                key = frozenset(leaves)
                found = number.get(key)
                if found is None:
                    found = number[key] = len(sets)
                    sets.append(key)
                set_of[i] = own_unions[own_key] = found
                continue
            if len(parts) <= 1:
                set_of[i] = parts.pop() if parts else 0
                continue
            ukey = tuple(sorted(parts))
            cached = unions.get(ukey)
            if cached is None:
                union: set[int] = set()
                for part in parts:
                    union |= sets[part]
                key = frozenset(union)
                found = number.get(key)
                if found is None:
                    found = number[key] = len(sets)
                    sets.append(key)
                cached = unions[ukey] = found
            set_of[i] = cached
        prov.update(zip(scope_evs.tolist(), map(sets.__getitem__, set_of)))
        return prov

    def _replay_seqs(self, evs: np.ndarray) -> np.ndarray:
        """Per event: the begin seq of the backward call that replays it (:meth:`backward_of_event`)
        for a recorded event, else (unrecorded, or never backpropagated) its own seq."""
        m = self.model
        seqs = m.seq[evs]
        begins = m.backward_after_many(m.tape[evs], seqs)
        return np.where(m.recorded[evs] & (self.ev_epoch[evs] >= 0) & (begins >= 0), begins, seqs)
