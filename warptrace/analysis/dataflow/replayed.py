"""Def-use edges of the graph replays that copy an earlier one, worked out once per template.

A replay that copies its template (``Model.row_copies``) has the template's access rows, so
its writes are the template's, moved. The walk back from one of its reads through the writes
to the read's allocation (:meth:`DefUse._writers_in_order`) steps over the copy's own writes
first: the template read's walk, moved. Where that walk ended inside the template (a covering
store, the producer limit), the copy's read has the template's producers, moved; where it went
on to the writes before the template, the copy's read goes on from the writes before the copy
with the producers and steps the template's had there. That rest of the walk depends only on
the read's allocation, bytes, producers found and steps taken, so it is searched once per copy
and such key (drone: 194 keys for the 2,825 of its 3,636 reads per replay that go on; 811 end
inside). A read with more writes before it inside the template than the step limit (its exact
scan could reach across the template's start) walks in each copy from its own place. The copies
whose walks found as many producers per key share one layout of their edges, built once for all
of them; the reads outside copies are answered as everywhere else. The write index the walks
go through (writes sorted by allocation, then seq) is put together the same way: per copy and
allocation, its template's writes there, moved, placed among the other writes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from warptrace.analysis.dataflow.base import combine_codes, expand_ranges, unique_inverse
from warptrace.analysis.dataflow.defuse import (
    _PRODUCER_LIMIT,
    _STEP_LIMIT,
    DefUse,
    Edges,
    _stable_order,
    joined_edges,
)


@dataclass
class _Layout:
    """The edges of a group of copies of one template whose walks beyond it found as many
    producers per key: the same layout for each copy."""

    starts: np.ndarray  # the copies' first rows
    sources: np.ndarray  # where each copy's producers beyond the template start in `found`
    row_counts: np.ndarray  # the edge count of each row of the template's range
    readers: np.ndarray  # the template rows of a copy's edges' readers
    moved: np.ndarray  # the template's producers inside it, its own rows
    n_found: int  # how many producers beyond the template each copy has in `found`
    pattern: np.ndarray  # a copy's edges as positions in [moved + shift, its part of `found`]
    found: np.ndarray  # the producers beyond the template, per copy and key, by rank
    template: int


class ReplayedDefUse(DefUse):
    """:class:`DefUse` with the reads of graph replays that copy a template answered per template."""

    def _copied_runs(self, valid: np.ndarray) -> list[tuple[int, int, int]]:
        return [  # the replays whose rows ran where their template's did (a replay's all do)
            (start, stop, template)
            for start, stop, template in self.model.row_copies
            if stop > start and np.array_equal(valid[start:stop], valid[template : template + stop - start])
        ]

    def _sorted_writes(
        self, writes: np.ndarray, copies: list[tuple[int, int, int]]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`DefUse._sorted_writes` where copies repeat their template's writes: the writes
        outside the copies, and per copy and allocation the template's writes to it, moved, are
        units sorted by (allocation, first row), expanded into the rows (no sort of every write)."""
        if not copies:
            return super()._sorted_writes(writes, copies)
        m = self.model
        outside, by_template = _outside_copies(copies, len(writes))
        own = np.nonzero(writes & outside)[0]  # row order, the templates' writes among them
        own_alloc, own_seq = m.acc_alloc[own], m.acc_seq[own]
        own_lo, own_hi = self.hulls(own)
        # the units' rows are taken from `source`: the own writes, then each template's writes by
        # allocation; a unit is one own write, or one copy's writes to one allocation. A copy's rows
        # are its template's, their seqs moved by one offset (Model.row_copies): the seqs too are
        # taken from the compact sources, not gathered from every row's
        source, source_seq, source_lo, source_hi = [own], [own_seq], [own_lo], [own_hi]
        unit_alloc, unit_row, unit_first = [own_alloc], [own], [np.arange(len(own))]
        unit_size, no_shift = [np.ones(len(own), dtype=np.int64)], np.zeros(len(own), dtype=np.int64)
        unit_shift, unit_seq_shift = [no_shift], [no_shift]
        at = len(own)
        for (template, size), starts in by_template.items():
            a, b = (int(x) for x in np.searchsorted(own, [template, template + size]))
            # positions in `own`: the template's writes by allocation
            by_alloc = a + _stable_order(own_alloc[a:b])
            allocs, first, count = np.unique(own_alloc[by_alloc], return_index=True, return_counts=True)
            source += [own[by_alloc]]
            source_seq += [own_seq[by_alloc]]
            source_lo += [own_lo[by_alloc]]
            source_hi += [own_hi[by_alloc]]
            n_copies, n_allocs = len(starts), len(allocs)
            unit_alloc.append(np.tile(allocs, n_copies))
            unit_row.append(np.repeat(starts, n_allocs))
            unit_first.append(np.tile(at + first, n_copies))
            unit_size.append(np.tile(count, n_copies))
            unit_shift.append(np.repeat(starts - template, n_allocs))
            unit_seq_shift.append(np.repeat(m.acc_seq[starts] - m.acc_seq[template], n_allocs))
            at += b - a
        alloc, row = np.concatenate(unit_alloc), np.concatenate(unit_row)
        order = np.lexsort((row, alloc))  # (allocation, first row): no own write lies inside a copy
        firsts, sizes = np.concatenate(unit_first)[order], np.concatenate(unit_size)[order]
        # expand_ranges(firsts, firsts + sizes) without the owner of each position: the per-unit
        # shifts are repeated over their units' positions instead of gathered through it
        taken = np.repeat(firsts - np.cumsum(sizes) + sizes, sizes)
        taken += np.arange(len(taken), dtype=np.int64)
        rows = np.concatenate(source)[taken]
        rows += np.repeat(np.concatenate(unit_shift)[order], sizes)
        seq = np.concatenate(source_seq)[taken]
        seq += np.repeat(np.concatenate(unit_seq_shift)[order], sizes)
        lo, hi = np.concatenate(source_lo)[taken], np.concatenate(source_hi)[taken]
        return rows, np.repeat(alloc[order], sizes), seq, lo, hi

    def _answer_reads(self, queried: np.ndarray, copies: list[tuple[int, int, int]]) -> None:
        if not copies:
            super()._answer_reads(queried, copies)
            return
        n_rows = len(queried)
        outside, by_template = _outside_copies(copies, n_rows)
        decided = joined_edges([edges for _, _, edges in self._search_blocks(queried & outside)])
        layouts: list[_Layout] = []
        for (template, size), starts in by_template.items():
            layouts += self._copy_layouts(decided, template, size, starts, queried)
        # edges of reader row r: _edge_start[r]:_edge_start[r + 1], each read's producers by rank
        counts = np.bincount(decided[0], minlength=n_rows)  # the running sums go straight in place
        for layout in layouts:
            for start in layout.starts.tolist():
                counts[start : start + len(layout.row_counts)] = layout.row_counts
        edge_start = np.empty(n_rows + 1, dtype=np.int64)
        edge_start[0] = 0
        np.cumsum(counts, out=edge_start[1:])
        del counts
        self._edge_start = edge_start
        self.edge_reader = np.empty(int(edge_start[-1]), dtype=np.int64)
        self.edge_writer = np.empty(int(edge_start[-1]), dtype=np.int64)
        readers, writers, ranks = decided
        place = edge_start[readers] + ranks
        self.edge_reader[place] = readers
        self.edge_writer[place] = writers
        for layout in layouts:
            width, n_found = len(layout.pattern), layout.n_found
            shifts, sources = (layout.starts - layout.template).tolist(), layout.sources.tolist()
            for first, shift, source in zip(edge_start[layout.starts].tolist(), shifts, sources):
                np.add(layout.readers, shift, out=self.edge_reader[first : first + width])
                taken = np.concatenate((layout.moved + shift, layout.found[source : source + n_found]))
                np.take(taken, layout.pattern, out=self.edge_writer[first : first + width])
        self._edge_events()

    def _copy_layouts(
        self, decided: Edges, template: int, size: int, starts: np.ndarray, queried: np.ndarray
    ) -> list[_Layout]:
        """The edges of the copies, first rows ``starts``, of the ``size`` rows from row ``template``
        (whose own edges are among ``decided``), one :class:`_Layout` per group of copies whose walks
        beyond their template found as many producers per key."""
        m, big = self.model, self._big
        reads = template + np.nonzero(queried[template : template + size])[0]
        if len(reads) == 0:
            return []
        alloc = m.acc_alloc[reads]
        lo, hi = self.hulls(reads)
        # the steps of each read's walk inside the template: its allocation's writes there before it
        steps = np.searchsorted(self.w_key, alloc * big + m.acc_seq[reads], side="left") - np.searchsorted(
            self.w_key, alloc * big + m.acc_seq[template], side="left"
        )
        whole = steps > _STEP_LIMIT  # walks from their own place in each copy
        readers, writers, ranks = decided
        mine = (readers >= template) & (readers < template + size)
        read_of = np.searchsorted(reads, readers[mine])  # position in `reads` of each pair's read
        writers, ranks = writers[mine], ranks[mine]
        # the producers inside the template, nearest first: the first ranks of the read's
        moved = (writers >= template) & ~whole[read_of]
        count = np.bincount(read_of[moved], minlength=len(reads))
        ended = count >= _PRODUCER_LIMIT
        last = np.nonzero(moved & (ranks == count[read_of] - 1))[0]
        last_w, last_r = writers[last], read_of[last]
        covers = (
            self.is_store[last_w] & (self.acc_lo[last_w] <= lo[last_r]) & (self.acc_hi[last_w] >= hi[last_r])
        )
        ended[last_r[covers]] = True

        # the walks that go on in each copy, one per key: from the copy's first row with the
        # template read's producers and steps, or (whole) from the read's own row
        going = np.nonzero(~ended)[0]
        offset = np.where(whole[going], reads[going] - template, 0)
        go_steps = np.where(whole[going], 0, steps[going])
        go_count = count[going]
        codes = unique_inverse(
            combine_codes([alloc[going], lo[going], hi[going], go_count, go_steps, offset])
        )[1]
        n_keys, n_copies = (int(codes.max()) + 1 if len(codes) else 0), len(starts)
        key = np.empty(n_keys, dtype=np.int64)
        key[codes] = np.arange(len(codes))  # a going read of each key
        key_read = going[key]
        # query c * n_keys + j: key j in copy c
        q_alloc = np.tile(alloc[key_read], n_copies)
        q_seq = m.acc_seq[(starts[:, None] + offset[key][None, :]).reshape(-1)]
        q_count = np.tile(go_count[key], n_copies)
        # searched key by key: a key's copies come in seq order, a sorted run, which numpy's search
        # walks on from the previous answer (drone's 232,600 queries in random order: twice the time)
        by_key = (q_alloc * big + q_seq).reshape(n_copies, n_keys).T.ravel()
        q_pos = np.searchsorted(self.w_key, by_key, side="left").reshape(n_keys, n_copies).T.ravel()
        found, found_w, found_r = self._walks_from(
            q_pos - 1,
            q_alloc,
            np.tile(lo[key_read], n_copies),
            np.tile(hi[key_read], n_copies),
            q_count,
            np.tile(go_steps[key], n_copies),
        )
        found_n = np.bincount(found, minlength=n_copies * n_keys)
        q_start = np.cumsum(found_n) - found_n
        by_query = np.empty(len(found), dtype=np.int64)  # each copy's producers by key, then rank
        by_query[q_start[found] + (found_r - q_count[found])] = found_w
        found_n = found_n.reshape(n_copies, n_keys)

        layouts: list[_Layout] = []
        group_of: dict[bytes, int] = {}  # copies with the same counts per key share a group
        groups = np.array(
            [group_of.setdefault(row.tobytes(), len(group_of)) for row in found_n], dtype=np.int64
        )
        moved_w = writers[moved]
        for group in range(int(groups.max()) + 1):
            copies = np.nonzero(groups == group)[0]
            key_n = found_n[copies[0]]
            go_n = key_n[codes]  # producers each going read finds beyond the template
            n_edges = count.copy()
            n_edges[going] += go_n
            row_counts = np.zeros(size, dtype=np.int64)
            row_counts[reads - template] = n_edges
            # a copy's edges: each read's moved producers (from its first edge), then those of its
            # key (after them), taken from [template's moved producers, the copy's by_query part]
            first = np.cumsum(n_edges) - n_edges
            pattern = np.empty(int(n_edges.sum()), dtype=np.int64)
            pattern[first[read_of[moved]] + ranks[moved]] = np.arange(len(moved_w))
            go_first = first[going] + go_count
            at, owner = expand_ranges(go_first, go_first + go_n)
            key_first = np.cumsum(key_n) - key_n
            pattern[at] = len(moved_w) + key_first[codes[owner]] + (at - go_first[owner])
            layouts.append(
                _Layout(
                    starts[copies],
                    q_start[copies * n_keys] if n_keys else np.zeros(len(copies), dtype=np.int64),
                    row_counts,
                    np.repeat(reads, n_edges),
                    moved_w,
                    int(key_n.sum()),
                    pattern,
                    by_query,
                    template,
                )
            )
        return layouts


def _outside_copies(
    copies: list[tuple[int, int, int]], n_rows: int
) -> tuple[np.ndarray, dict[tuple[int, int], np.ndarray]]:
    """Per access row: outside every copy; and per (template's first row, size) the first rows of
    its copies, ascending."""
    outside = np.ones(n_rows, dtype=bool)
    by_template: dict[tuple[int, int], list[int]] = {}
    for start, stop, template in copies:
        outside[start:stop] = False
        by_template.setdefault((template, stop - start), []).append(start)
    return outside, {key: np.asarray(starts, dtype=np.int64) for key, starts in by_template.items()}
