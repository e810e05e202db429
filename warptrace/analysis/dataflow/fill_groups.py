"""Gradient memory grouped by the backward calls that fill it (:attr:`Seeds.fill_groups`): the
groups' first rows, first adjoint rows and filling calls, by a stable sort of the fill rows by
memory, or, where the calls run one after the other, from a presence table of the (call,
memory) pairs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from warptrace.analysis.dataflow.defuse import _stable_order


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


# (first row, first adjoint row or -1, cuts, calls) of each memory group: see Seeds.fill_groups
GroupedFills = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def grouped_fills_sorted(
    rows: np.ndarray, memory: np.ndarray, calls: np.ndarray, adjoint: np.ndarray
) -> GroupedFills:
    """The fill rows ``rows`` (ascending) grouped by their ``memory`` code, in order of first row:
    each group's first row and first row where ``adjoint`` holds (-1: none), and the ``calls`` of
    its rows in row order, repeats of the same call in a row dropped (group g's are
    ``calls[cuts[g]:cuts[g + 1]]``); by a stable sort of the rows by memory."""
    n = len(rows)
    # stable: each memory's rows stay in row order (lex_order)
    order = _stable_order(memory)
    memory, c = memory[order], calls[order]
    new_group = np.ones(n, dtype=bool)
    new_group[1:] = memory[1:] != memory[:-1]
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
    adjoint_at = np.nonzero(adjoint[order])[0]
    adjoint_row = np.full(len(starts), -1, dtype=np.int64)
    if len(adjoint_at):
        adj_groups = group[adjoint_at]  # in order: the first of each group where it changes
        changes = np.empty(len(adj_groups), dtype=bool)
        changes[0] = True
        np.not_equal(adj_groups[1:], adj_groups[:-1], out=changes[1:])
        first_adj = np.flatnonzero(changes)
        adjoint_row[rank[adj_groups[first_adj]]] = rows[order[adjoint_at[first_adj]]]
    return rows[order[firsts]], adjoint_row, cuts, c[kept]


def grouped_fills_in_call_order(
    rows: np.ndarray, memory: np.ndarray, calls: np.ndarray, adjoint: np.ndarray
) -> GroupedFills | None:
    """:func:`grouped_fills_sorted` where the rows' ``calls`` never decrease (the calls run one
    after the other: drone's 1.33M fill rows) and the (call, memory) pairs fit a table of about
    the rows' number: a group's calls in row order, repeats in a row dropped, are then its
    distinct calls, ascending, read off a presence table of the pairs instead of sorting the rows;
    each memory's first row (and first adjoint row) from growing prefixes of the rows. None
    where that does not apply."""
    n = len(rows)
    if n == 0 or int(memory.min()) < 0 or int(calls[0]) < 0 or bool(np.any(calls[1:] < calls[:-1])):
        return None
    n_memory = int(memory.max()) + 1
    n_calls = int(calls[-1]) + 1
    if n_calls * n_memory > 4 * n + (1 << 16):
        return None
    present = np.zeros(n_calls * n_memory, dtype=bool)
    present[calls * n_memory + memory] = True
    pair_call, pair_memory = np.divmod(np.flatnonzero(present), n_memory)  # by call, then memory
    first = first_positions(memory, n_memory)
    groups = np.flatnonzero(first < n)
    groups = groups[np.argsort(first[groups], kind="stable")]  # by first fill (distinct positions)
    rank = np.full(n_memory, -1, dtype=np.int64)
    rank[groups] = np.arange(len(groups))
    pair_rank = rank[pair_memory]
    by_group = _stable_order(pair_rank)  # each group's calls stay ascending
    cuts = np.searchsorted(pair_rank[by_group], np.arange(len(groups) + 1), side="left")
    adjoint_at = np.flatnonzero(adjoint)
    first_adjoint = first_positions(memory[adjoint_at], n_memory)[groups]
    has_adjoint = first_adjoint < len(adjoint_at)
    adjoint_row = np.full(len(groups), -1, dtype=np.int64)
    adjoint_row[has_adjoint] = rows[adjoint_at[first_adjoint[has_adjoint]]]
    return rows[first[groups]], adjoint_row, cuts, pair_call[by_group]


def first_positions(codes: np.ndarray, n_codes: int) -> np.ndarray:
    """Per code in ``range(n_codes)``: the position of its first occurrence in ``codes``
    (``len(codes)`` when none), from growing prefixes until every code that occurs is seen."""
    n = len(codes)
    first = np.full(n_codes, n, dtype=np.int64)
    if n == 0:
        return first
    occurring = int(np.count_nonzero(np.bincount(codes, minlength=n_codes)))
    size = 1 << 12
    while True:
        seen, at = np.unique(codes[:size], return_index=True)
        if len(seen) == occurring or size >= n:
            first[seen] = at
            return first
        size *= 8
