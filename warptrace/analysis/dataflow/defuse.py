"""Def-use edges: for every read access row, the write rows that produced the bytes it read
(the nearest overlapping write, then earlier ones while the nearer writes only accumulate
into or partly cover the read range). Computed with a sort and a binary search per
allocation, stepping back a bounded number of writes: linear-ish in the number of access
rows, never quadratic."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property

import numpy as np

from warptrace.analysis.dataflow.base import DataflowBase, combine_codes, expand_ranges, unique_inverse

# How many earlier writes a read steps over (per read) before the exact fallback.
_STEP_LIMIT = 24
# How many earlier writes the exact fallback scans per read (bounds pathological cases).
_SCAN_LIMIT = 4096
# How many producers a read keeps (the nearest ones).
_PRODUCER_LIMIT = 8
# From how many queries on _writers_for sorts them by (allocation, seq) first.
_SORT_QUERIES = 1 << 14
# How many access rows _build_edges answers the reads of at a time.
_BLOCK_ROWS = 1 << 18

# Def-use pairs: (reader access row, write access row, rank among the reader's producers).
Edges = tuple[np.ndarray, np.ndarray, np.ndarray]


def _stable_order(values: np.ndarray) -> np.ndarray:
    """``np.argsort(values, kind="stable")`` of small-range integers (ids): a radix sort on a
    16-bit copy when the range allows (numpy sorts 16-bit keys stably by radix)."""
    if len(values) and int(values.max()) - int(values.min()) <= np.iinfo(np.int16).max:
        return np.argsort((values - int(values.min())).astype(np.int16), kind="stable")
    return np.argsort(values, kind="stable")


def lex_order(columns: list[np.ndarray]) -> np.ndarray:
    """``np.lexsort(columns[::-1])``: the stable order by the first column, then the next, ...
    of equally long integer columns, by one dense code per position (radix-sorted when there
    are few distinct combinations)."""
    return _stable_order(unique_inverse(combine_codes(columns))[1])


def _key_order(alloc: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """Stable order of queries by (allocation, seq): by allocation alone when the queries
    already come in seq order, as access rows do."""
    if len(seq) < 2 or bool(np.all(seq[1:] >= seq[:-1])):
        return _stable_order(alloc)
    return np.lexsort((seq, alloc))


class DefUse(DataflowBase):
    """Def-use edges: for every read access row, the write rows that produced the bytes it read"""

    # ------------------------------------------------------------ def-use
    def _build_edges(self) -> None:
        m = self.model
        valid = (m.acc_alloc >= 0) & self._exec
        big = int(m.seq.max()) + 2 if m.n_events else 2
        self._big = big
        copies = self._copied_runs(valid)
        # the replays whose reads' edges are their template's, moved (see .replayed); the backward
        # slices of their calls follow their template call's (Seeds._slices)
        self.edge_copies = copies
        # write rows sorted by (alloc, seq): = np.argsort(w_alloc * big + w_seq, kind="stable")
        self.w_rows, self.w_alloc, w_seq, self.w_lo, self.w_hi = self._sorted_writes(
            self.is_write & valid, copies
        )
        self.w_key = self.w_alloc * big + w_seq
        self.w_store = self.is_store[self.w_rows]
        stores = np.nonzero(self.w_store)[0]  # plain-store writes only, same order
        self.s_key = self.w_key[stores]
        self.s_rows, self.s_lo, self.s_hi = self.w_rows[stores], self.w_lo[stores], self.w_hi[stores]

        self._answer_reads(self.is_read & valid, copies)

    def _copied_runs(self, valid: np.ndarray) -> list[tuple[int, int, int]]:
        """The graph replays whose access rows repeat a template's (first row, stop row, the
        template's first row): none here (see :mod:`.replayed`)."""
        return []

    def _sorted_writes(
        self, writes: np.ndarray, copies: list[tuple[int, int, int]]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The access rows where ``writes`` holds in (allocation, seq) order (stable), and their
        allocation, seq and byte hull (``copies``: see :meth:`_copied_runs`)."""
        m = self.model
        rows = np.nonzero(writes)[0]
        w_alloc, w_seq = m.acc_alloc[rows], m.acc_seq[rows]
        order = _key_order(w_alloc, w_seq)
        rows = rows[order]
        return rows, w_alloc[order], w_seq[order], *self.hulls(rows)

    def _answer_reads(self, queried: np.ndarray, copies: list[tuple[int, int, int]]) -> None:
        """The def-use edges of the access rows where ``queried`` holds (``copies``: see
        :meth:`_copied_runs`)."""
        n_rows = len(queried)
        # The reads are answered a block of rows at a time: the temporaries stay block-sized
        # (the whole trace's would add hundreds of MiB to the peak, each page a fault) and the
        # edges of a block's reads can be placed within the block, rows being in seq order.
        self._edge_start = np.zeros(n_rows + 1, dtype=np.int64)
        reader_parts: list[np.ndarray] = []
        writer_parts: list[np.ndarray] = []
        for first, last, (reader_rows, writers, ranks) in self._search_blocks(queried):
            local = reader_rows - first
            counts = np.bincount(local, minlength=last - first)
            self._edge_start[first + 1 : last + 1] = counts
            # grouped by reader row, each read's producers nearest first: the rank is the position
            # among its read's producers (a placement instead of a stable sort by reader row)
            place = (np.cumsum(counts) - counts)[local] + ranks
            block_readers = np.empty(len(place), dtype=np.int64)
            block_writers = np.empty(len(place), dtype=np.int64)  # access row of the write
            block_readers[place] = reader_rows
            block_writers[place] = writers
            reader_parts.append(block_readers)
            writer_parts.append(block_writers)
        # edges of reader row r: _edge_start[r]:_edge_start[r + 1]
        np.cumsum(self._edge_start, out=self._edge_start)
        self.edge_reader = np.concatenate(reader_parts) if reader_parts else np.zeros(0, dtype=np.int64)
        self.edge_writer = np.concatenate(writer_parts) if writer_parts else np.zeros(0, dtype=np.int64)
        self._edge_events()

    def _edge_events(self) -> None:
        self.edge_reader_ev = self.acc_ev[self.edge_reader]
        self.edge_writer_ev = self.acc_ev[self.edge_writer]

    def _search_blocks(self, queried: np.ndarray) -> Iterator[tuple[int, int, Edges]]:
        """Per block of ``_BLOCK_ROWS`` access rows: its first and stop row, and the def-use
        pairs of its rows where ``queried`` holds, as (reader row, write row, rank)."""
        m = self.model
        n_rows = len(queried)
        for first in range(0, n_rows, _BLOCK_ROWS):
            last = min(n_rows, first + _BLOCK_ROWS)
            reads = first + np.nonzero(queried[first:last])[0]
            # the block's reads in (allocation, seq) order (rows come in seq order): see _writers_for
            reads = reads[_stable_order(m.acc_alloc[reads])]
            readers, writers, ranks = self._writers_in_order(
                m.acc_alloc[reads], *self.hulls(reads), m.acc_seq[reads]
            )
            yield first, last, (reads[readers], writers, ranks)

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
        if n == 0 or len(self.w_key) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        if n >= _SORT_QUERIES:
            # many queries: answer them in (allocation, seq) order, which keeps the binary
            # searches and the steps back through the write index local in memory
            order = _key_order(alloc, seq)
            readers, writers, _ = self._writers_in_order(alloc[order], lo[order], hi[order], seq[order])
            return order[readers], writers
        readers, writers, _ = self._writers_in_order(alloc, lo, hi, seq)
        return readers, writers

    def _writers_in_order(
        self, alloc: np.ndarray, lo: np.ndarray, hi: np.ndarray, seq: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`_writers_for` (the queries in any order; (allocation, seq) order is the fast one),
        with each pair's rank among the pairs of its query (0 for the first): a query's pairs come
        in rank order."""
        n = len(alloc)
        if n == 0 or len(self.w_key) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int16)
        found_q: list[np.ndarray] = []
        found_w: list[np.ndarray] = []
        found_r: list[np.ndarray] = []
        pos = np.searchsorted(self.w_key, alloc * self._big + seq, side="left") - 1
        count = np.zeros(n, dtype=np.int16)  # producers found per query (<= _PRODUCER_LIMIT)
        # the first step looks at every query: no gathers through `active` (the costly one)
        active = np.arange(n)
        p = pos
        a_alloc, a_lo, a_hi = alloc, lo, hi
        for step in range(_STEP_LIMIT):
            if step:
                if len(active) == 0:
                    break
                p = pos[active]
                a_alloc = alloc[active]
            ok = (p >= 0) & (self.w_alloc[np.maximum(p, 0)] == a_alloc)
            if step or not ok.all():
                active, p = active[ok], p[ok]
                a_lo, a_hi = lo[active], hi[active]
            if len(active) == 0:
                break
            w_lo, w_hi = self.w_lo[p], self.w_hi[p]
            overlap = (w_lo < a_hi) & (a_lo < w_hi)
            if overlap.all():  # the usual first step: the nearest write overlaps every read
                hit, hit_p = active, p
            else:
                hit, hit_p = active[overlap], p[overlap]
            found_q.append(hit)
            found_w.append(self.w_rows[hit_p])
            if step:
                found_r.append(count[hit])
                count[hit] += 1
            else:  # nothing found before: rank 0, no gather of the counts
                found_r.append(np.zeros(len(hit), dtype=np.int16))
                count[hit] = 1
            covers = overlap & self.w_store[p] & (w_lo <= a_lo) & (w_hi >= a_hi)
            # after step s a query has at most s + 1 producers: below the limit while s + 1 < it
            keep = ~covers if step + 1 < _PRODUCER_LIMIT else ~covers & (count[active] < _PRODUCER_LIMIT)
            active = active[keep]
            pos[active] = p[keep] - 1
        self._scan_rest(active, pos, count, alloc, lo, hi, (found_q, found_w, found_r))
        if not found_q:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int16)
        return (
            np.concatenate(found_q).astype(np.int64, copy=False),
            np.concatenate(found_w).astype(np.int64, copy=False),
            np.concatenate(found_r).astype(np.int16, copy=False),
        )

    def _scan_rest(
        self,
        queries: np.ndarray,
        pos: np.ndarray,
        count: np.ndarray,
        alloc: np.ndarray,
        lo: np.ndarray,
        hi: np.ndarray,
        found: tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]],
    ) -> None:
        """The end of the walks of ``queries`` still going after ``_STEP_LIMIT`` steps: the
        overlapping writes among the ``_SCAN_LIMIT`` before write-index position ``pos[q]`` + 1
        (after the last covering store, the nearest ``_PRODUCER_LIMIT - count[q]``), appended to
        ``found`` (query, write row, rank) oldest first, ranked from ``count[q]``."""
        found_q, found_w, found_r = found
        for q in queries.tolist():  # rare: long runs of writes to other parts of the allocation
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
            found_r.append(int(count[q]) + np.arange(len(idx), dtype=np.int16))

    def _walks_from(
        self,
        pos: np.ndarray,
        alloc: np.ndarray,
        lo: np.ndarray,
        hi: np.ndarray,
        count: np.ndarray,
        steps: np.ndarray,
    ) -> Edges:
        """The rest of :meth:`_writers_in_order`'s walks (the same pairs, ranks and limits) for
        queries that have taken ``steps`` steps and found ``count`` producers, going on at
        write-index position ``pos``: (query, write row, rank)."""
        pos, count, steps = pos.copy(), count.astype(np.int16), steps.astype(np.int64)
        found_q: list[np.ndarray] = []
        found_w: list[np.ndarray] = []
        found_r: list[np.ndarray] = []
        active = np.nonzero(count < _PRODUCER_LIMIT)[0]
        while len(active):
            spent = steps[active] >= _STEP_LIMIT
            if spent.any():
                self._scan_rest(active[spent], pos, count, alloc, lo, hi, (found_q, found_w, found_r))
                active = active[~spent]
            p = pos[active]
            ok = (p >= 0) & (self.w_alloc[np.maximum(p, 0)] == alloc[active])
            active, p = active[ok], p[ok]
            a_lo, a_hi = lo[active], hi[active]
            w_lo, w_hi = self.w_lo[p], self.w_hi[p]
            overlap = (w_lo < a_hi) & (a_lo < w_hi)
            hit = active[overlap]
            found_q.append(hit)
            found_w.append(self.w_rows[p[overlap]])
            found_r.append(count[hit])
            count[hit] += 1
            covers = overlap & self.w_store[p] & (w_lo <= a_lo) & (w_hi >= a_hi)
            keep = ~covers & (count[active] < _PRODUCER_LIMIT)
            active = active[keep]
            pos[active] = p[keep] - 1
            steps[active] += 1
        return joined_edges(list(zip(found_q, found_w, found_r)))

    def writer_rows(self, row: int) -> np.ndarray:
        """Write rows that produced what access row ``row`` read (empty for writes or fresh memory)."""
        return self.edge_writer[self._edge_start[row] : self._edge_start[row + 1]]

    def writer_rows_many(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`writer_rows` of each access row of ``rows`` in turn, and for each write row the
        position in ``rows`` of the read it produced."""
        edges, owner = expand_ranges(self._edge_start[rows], self._edge_start[rows + 1])
        return self.edge_writer[edges], owner

    def rows_of_events(self, evs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The access rows of each event of ``evs`` in turn (``accesses_of``), and for each row the
        position in ``evs`` of its event."""
        m = self.model
        return expand_ranges(m.acc_start[evs], m.acc_stop[evs])

    def edges_of_events(self, evs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The def-use edges of the reads of each event of ``evs`` in turn (by row, each read's
        producers nearest first), and for each edge the position in ``evs`` of its event. An
        event's rows are one range and only reads have edges, so its edges are one range too:
        expanded per event, not per access row."""
        m = self.model
        return expand_ranges(self._edge_start[m.acc_start[evs]], self._edge_start[m.acc_stop[evs]])

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

    def read_rows_of_allocs(
        self, alloc_ids: list[int]
    ) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """(read rows, their seqs, byte lo, byte hi) in time order of each allocation of
        ``alloc_ids`` that is read: the entries of the index :meth:`reads_between` searches.
        Until that index is built, only these allocations' rows are gathered (one pass)."""
        if "_read_rows_by_alloc" in self.__dict__:
            index = self._read_rows_by_alloc
            return {a: index[a] for a in alloc_ids if a in index}
        return self._read_index(np.isin(self.model.acc_alloc, np.asarray(alloc_ids, dtype=np.int64)))

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
        return self._read_index(self.model.acc_alloc >= 0)

    def _read_index(
        self, of_allocs: np.ndarray
    ) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """:attr:`_read_rows_by_alloc` for the read rows where ``of_allocs`` is true."""
        m = self.model
        rows = np.nonzero(self.is_read & of_allocs)[0]
        rows = rows[_stable_order(m.acc_alloc[rows])]
        allocs = m.acc_alloc[rows]
        seqs, (lows, highs) = m.acc_seq[rows], self.hulls(rows)
        table: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        if len(rows):
            cuts = [0, *(np.nonzero(np.diff(allocs))[0] + 1).tolist(), len(rows)]
            for start, stop in zip(cuts[:-1], cuts[1:]):
                table[int(allocs[start])] = (
                    rows[start:stop],
                    seqs[start:stop],
                    lows[start:stop],
                    highs[start:stop],
                )
        return table


def joined_edges(parts: list[Edges]) -> Edges:
    """The pairs of ``parts`` one after the other."""
    if not parts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int16)
    return (
        np.concatenate([p[0] for p in parts]).astype(np.int64, copy=False),
        np.concatenate([p[1] for p in parts]).astype(np.int64, copy=False),
        np.concatenate([p[2] for p in parts]).astype(np.int16, copy=False),
    )
