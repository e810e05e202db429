"""Provenance: for every recorded forward event, the differentiable leaves (arrays with a
gradient that no recorded event produced: parameters, initial states) whose values flowed
into it along recorded launches and copies."""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, Mapping
from functools import cached_property

import numpy as np

from warptrace.analysis.dataflow.seeds import Seeds
from warptrace.trace import schema as S

# How many scope events provenance gathers the reads and edges of at a time.
_BLOCK_EVENTS = 1 << 14


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
    def provenance(self) -> Mapping[int, frozenset[int]]:
        """For each recorded forward event (and unrecorded copies inside a tape scope): the
        differentiable leaves whose values reached it through recorded events.

        A read of an array that has a ``.grad`` (at the backward that replays the event)
        and that no recorded event produced is a leaf: a parameter or an initial state.
        Values flow from writer to reader along def-use edges between recorded events,
        across tapes too (state carried from one tape to the next keeps its leaves)."""
        m = self.model
        K = self._K
        scope = m.recorded | ((m.kind == K[S.COPY]) & (m.tape >= 0))
        scope &= (m.phase == S.FORWARD) & ~m.adjoint & (m.parent < 0)
        empty: frozenset[int] = frozenset()
        scope_evs = np.nonzero(scope)[0]
        if len(scope_evs) == 0:
            return {}
        # when each event is replayed (the seq its leaves' gradients are looked up at)
        whens = self._replay_seqs(scope_evs)
        # producers: def-use edges from an earlier in-scope event (already in prov); leaves:
        # unproduced reads of arrays with a gradient, not of a gradient buffer. Found a block of
        # events at a time: the per-row and per-edge temporaries of every scope event at once
        # would set the analysis' peak memory (the drone trace: 100 MiB more)
        live_index_parts, live_writer_parts, leaf_index_parts, leaf_array_parts = [], [], [], []
        for first in range(0, len(scope_evs), _BLOCK_EVENTS):
            block = scope_evs[first : first + _BLOCK_EVENTS]
            edges, edge_index = self.edges_of_events(block)  # per event, not per read row
            writer_ev = self.edge_writer_ev[edges]
            live = scope[writer_ev] & (writer_ev < block[edge_index])
            live_index_parts.append(edge_index[live] + first)  # as positions in scope_evs
            live_writer_parts.append(writer_ev[live])
            rows, index = self.rows_of_events(block)
            index += first
            # the rows an edge from an earlier in-scope event reaches, marked over the block's span
            base = int(rows[0]) if len(rows) else 0
            produced = np.zeros(int(rows[-1]) + 1 - base if len(rows) else 0, dtype=bool)
            produced[self.edge_reader[edges[live]] - base] = True
            read = self.is_read[rows] & ~produced[rows - base]
            rows, index = rows[read], index[read]
            cand = ~self.grad_row_mask[rows]
            leaf = np.zeros(len(rows), dtype=bool)
            if np.any(cand):
                leaf[cand] = self.has_grad_many(m.acc_array[rows[cand]], whens[index[cand]])
            leaf_index_parts.append(index[leaf])
            leaf_array_parts.append(m.acc_array[rows[leaf]])
        live_index = np.concatenate(live_index_parts)
        live_writer = np.concatenate(live_writer_parts)
        leaf_index = np.concatenate(leaf_index_parts)
        leaf_array = np.concatenate(leaf_array_parts)
        roots: dict[int, int] = {}
        n = len(scope_evs)
        # where each position's producers and leaves start (both indexes ascend): counted, not searched
        w_cuts, l_cuts = _starts_of(live_index, n), _starts_of(leaf_index, n)
        w_cut, l_cut = w_cuts.tolist(), l_cuts.tolist()
        # each distinct leaf set once (``sets``, interned), events carry its number: the
        # producers of an event are a set of small ints, not of frozensets
        sets: list[frozenset[int]] = [empty]
        number: dict[frozenset[int], int] = {empty: 0}
        set_of = [0] * n  # per scope position: the number of its event's leaf set
        # as scope positions (every live writer is in scope): looked up per event, not searched
        position = np.full(m.n_events, -1, dtype=np.int64)
        position[scope_evs] = np.arange(n, dtype=np.int64)
        writers_at = position[live_writer]
        unions: dict[tuple[int, ...], int] = {}
        own_unions: dict[tuple[tuple[int, ...], tuple[int, ...]], int] = {}

        def walk(start: int, stop: int) -> None:  # the events of scope positions start:stop, in order
            # python ints of these positions' producers and leaves only (most graph replays are
            # copied, never walked: lists of every position's would cost more than the walk)
            w_base, l_base = w_cut[start], l_cut[start]
            writers_list = writers_at[w_base : w_cut[stop]].tolist()
            leaves_list = leaf_array[l_base : l_cut[stop]].tolist()
            for i in range(start, stop):
                parts = {set_of[w] for w in writers_list[w_cut[i] - w_base : w_cut[i + 1] - w_base]}
                own = leaves_list[l_cut[i] - l_base : l_cut[i + 1] - l_base]
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

        # a graph replay whose events read what the previous copy's did (the same own leaves, the
        # same producers inside the replay, producers before it with the same leaf sets) has its
        # leaf sets, event for event: copied instead of walked
        w_count, l_count = np.diff(w_cuts), np.diff(l_cuts)

        def signature(start: int, stop: int) -> np.ndarray:
            """Per producer of positions start:stop: -1 - its distance from start when it is one
            of them, else its leaf set number (final: it comes before them)."""
            writers = writers_at[w_cut[start] : w_cut[stop]]
            sig = -1 - (writers - start)
            before = np.nonzero(writers < start)[0]
            sig[before] = np.fromiter((set_of[w] for w in writers[before].tolist()), np.int64, len(before))
            return sig

        def same(a: int, b: int, ta: int) -> bool:
            """Whether positions a:b (a replay) and ta:ta + b - a (an earlier copy of it) are the
            same events relative to their first, with the same own leaves and, event for event,
            the same producers in the same order: at the same distance among them, or before them
            with the same leaf set."""
            tb = ta + b - a
            # int64 arrays compared by their bytes (equal bytes <=> equal lengths and values):
            # np.array_equal's checks cost more than the comparison of a replay's few hundred
            return (
                tb <= a  # the earlier copy's positions are all walked (or copied) already
                and int(m.orig_seq[scope_evs[a]]) == int(m.orig_seq[scope_evs[ta]])
                and (scope_evs[a:b] - scope_evs[a]).tobytes() == (scope_evs[ta:tb] - scope_evs[ta]).tobytes()
                and l_count[a:b].tobytes() == l_count[ta:tb].tobytes()
                and w_count[a:b].tobytes() == w_count[ta:tb].tobytes()
                and leaf_array[l_cut[a] : l_cut[b]].tobytes() == leaf_array[l_cut[ta] : l_cut[tb]].tobytes()
                and signature(a, b).tobytes() == signature(ta, tb).tobytes()
            )

        done = 0
        self.provenance_copies = 0  # how many replays were copied (tests, benchmarks)
        for a, b, ta in self._scope_copies(scope_evs):
            walk(done, a)
            if same(a, b, ta):
                set_of[a:b] = set_of[ta : ta + b - a]
                self.provenance_copies += 1
            else:
                walk(a, b)
            done = b
        walk(done, n)
        return LeafSets(scope_evs, position, set_of, sets)

    def _scope_copies(self, scope_evs: np.ndarray) -> list[tuple[int, int, int]]:
        """(start, stop, previous start) in scope positions of each graph replay that is a copy of
        an earlier one (:attr:`Model.replay_runs`) and has events in scope, in order, with the
        start of the latest earlier copy of the same events (the first replay reads what came
        before the replays, the later ones what the replay before them left)."""
        first, stop, template = self.model.replay_runs
        previous = np.arange(len(template))
        latest: dict[int, int] = {}
        for run, of in enumerate(template.tolist()):
            previous[run] = latest.get(of, run)
            latest[of] = run
        copies = np.nonzero(previous != np.arange(len(template)))[0]
        if len(copies) == 0:
            return []
        a = np.searchsorted(scope_evs, first[copies])
        b = np.searchsorted(scope_evs, stop[copies])
        ta = np.searchsorted(scope_evs, first[previous[copies]])
        keep = a < b
        return list(zip(a[keep].tolist(), b[keep].tolist(), ta[keep].tolist()))

    def _replay_seqs(self, evs: np.ndarray) -> np.ndarray:
        """Per event: the begin seq of the backward call that replays it (:meth:`backward_of_event`)
        for a recorded event, else (unrecorded, or never backpropagated) its own seq."""
        m = self.model
        seqs = m.seq[evs]
        begins = m.backward_after_many(m.tape[evs], seqs)
        return np.where(m.recorded[evs] & (self.ev_epoch[evs] >= 0) & (begins >= 0), begins, seqs)


def _starts_of(index: np.ndarray, n: int) -> np.ndarray:
    """``np.searchsorted(index, np.arange(n + 1))`` of an ascending ``index`` of values in
    ``range(n)``: per value, where its entries start (and the end), by counting them."""
    starts = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(index, minlength=n), out=starts[1:])
    return starts


class LeafSets(Mapping[int, frozenset[int]]):
    """:attr:`Provenance.provenance`: each scope event's leaf set, looked up through its scope
    position (a dict of every scope event, drone's 253,200, cost more than the rules' few
    thousand lookups). Ordered by event, as such a dict would be."""

    def __init__(
        self, events: np.ndarray, position: np.ndarray, set_of: list[int], sets: list[frozenset[int]]
    ) -> None:
        self._events = events  # the scope events, ascending
        self._position = position  # per event: its scope position, -1 when out of scope
        self._set_of = set_of  # per scope position: the number of its leaf set in `sets`
        self._sets = sets

    def __getitem__(self, ev: int) -> frozenset[int]:
        if not 0 <= ev < len(self._position) or (position := int(self._position[ev])) < 0:
            raise KeyError(ev)
        return self._sets[self._set_of[position]]

    def get(self, ev: int, default: frozenset[int] | None = None) -> frozenset[int] | None:  # type: ignore[override]
        if not 0 <= ev < len(self._position) or (position := int(self._position[ev])) < 0:
            return default
        return self._sets[self._set_of[position]]

    def __contains__(self, ev: object) -> bool:
        return isinstance(ev, (int, np.integer)) and self.get(int(ev)) is not None

    def __iter__(self) -> Iterator[int]:
        return iter(self._events.tolist())

    def __len__(self) -> int:
        return len(self._events)

    def items(self) -> ItemsView[int, frozenset[int]]:
        return dict(zip(self._events.tolist(), map(self._sets.__getitem__, self._set_of))).items()
