"""The access columns every part of the dataflow works on (read/write/accumulate masks, byte
hulls, the event of each access row), and small helpers shared by the parts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from warptrace.analysis.model import Model
from warptrace.trace import schema as S


class DataflowBase:
    """Per-access-row columns derived from the model once."""

    def __init__(self, model: Model) -> None:
        self.model = model
        m = model
        # event index of each access row (the model's, shared)
        self.acc_ev = m.acc_near_ev
        # byte hull of each access row within its allocation (0, 0 for unknown arrays)
        max_id = max(m.arrays, default=-1)
        lo_of = np.zeros(max_id + 2, dtype=np.int64)
        hi_of = np.zeros(max_id + 2, dtype=np.int64)
        for info in m.arrays.values():
            lo_of[info.array_id], hi_of[info.array_id] = info.hull
        ids = m.acc_array
        # a graph replay that copies its template has its rows (Model.decided_rows): the ids of
        # the other rows bound them all
        decided_ids = ids[m.decided_rows]
        clip = bool(len(decided_ids)) and (int(decided_ids.min()) < -1 or int(decided_ids.max()) > max_id + 1)
        known_only = min(m.arrays, default=0) < 0  # negative ids read 0, not a slot from the end
        self.acc_lo = ByArray(ids, lo_of, max_id, clip, known_only)
        self.acc_hi = ByArray(ids, hi_of, max_id, clip, known_only)
        role = m.acc_role
        self.is_read = (role & S.ROLE_READ) != 0
        self.is_write = (role & S.ROLE_WRITE) != 0
        flags = m.acc_flags
        self.is_accumulate = (flags & S.FLAG_ACCUMULATE) != 0
        self.is_store = self.is_write & ~self.is_accumulate
        # the recorder could not analyse the kernel: every argument is marked read and stored
        self.is_uncertain = (flags & S.FLAG_UNCERTAIN) != 0
        self._exec = self._executed_rows()
        self._K = S.EVENT_KIND_CODES

    def _executed_rows(self) -> np.ndarray:
        """Per access row, whether its event ran (``executed[acc_ev]``): gathered for the rows
        outside the graph replays that copy a template (Model.decided_rows) and copied into those
        from their template's rows (every event of a replay ran: analysis.replay marks them)."""
        m = self.model
        decided = m.decided_rows
        if isinstance(decided, slice):
            return m.executed[self.acc_ev]
        rows = np.empty(len(self.acc_ev), dtype=bool)
        rows[decided] = m.executed[self.acc_ev[decided]]
        m.fill_row_copies(rows)
        return rows

    def hulls(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(acc_lo[rows], acc_hi[rows])`` with one gather of the rows' array ids."""
        ids = self.model.acc_array[rows]
        return self.acc_lo.of_ids(ids), self.acc_hi.of_ids(ids)


class ByArray:
    """A per-access-row column that depends only on the row's array id, looked up for the rows
    asked about: ``column[rows]`` is ``by_id[acc_array[rows]]`` (ids clipped to -1..max_id + 1 when
    ``clip``; 0 for negative ids when ``known_only``). Stored for every row, each such int64
    column would be 50 MiB on a trace of 6.7M access rows, and every page of it a fault; the
    lookup costs one more gather, from a table small enough to stay in cache."""

    def __init__(self, ids: np.ndarray, by_id: np.ndarray, max_id: int, clip: bool, known_only: bool) -> None:
        self._ids, self._by_id, self._max_id = ids, by_id, max_id
        self._clip, self._known_only = clip, known_only

    def __getitem__(self, rows: Any) -> Any:
        return self.of_ids(self._ids[rows])

    def of_ids(self, ids: Any) -> Any:
        """The column's values for rows of array ids ``ids`` (``self[rows]`` is
        ``self.of_ids(acc_array[rows])``: columns of the same ids share that gather)."""
        if self._clip:
            ids = np.clip(ids, -1, self._max_id + 1)
        if self._known_only:
            return np.where(ids >= 0, self._by_id[ids], 0)
        return self._by_id[ids]  # id -1: the last slot, 0


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


def expand_ranges(starts: np.ndarray, stops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions of the ranges ``[starts[i], stops[i])`` one after the other, and for each
    position the index ``i`` of its range."""
    counts = stops - starts
    offsets = np.cumsum(counts) - counts
    owner = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
    flat = np.arange(len(owner), dtype=np.int64) + (starts - offsets)[owner]
    return flat, owner


def bisect_seq(changes: Sequence[tuple[int, Any]], seq: int) -> int:
    """Number of changes with change seq <= seq."""
    lo, hi = 0, len(changes)
    while lo < hi:
        mid = (lo + hi) // 2
        if changes[mid][0] <= seq:
            lo = mid + 1
        else:
            hi = mid
    return lo


def unique_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` of a 1-d integer array, by a lookup table when
    the values span a small range (ids, codes): linear instead of a sort of the whole array."""
    values = np.asarray(values)
    if len(values) == 0 or values.dtype.kind not in "iu":
        unique, inverse = np.unique(values, return_inverse=True)
        return unique, inverse.reshape(-1)
    low, high = int(values.min()), int(values.max())
    span = high - low + 1
    if span > 4 * len(values) + (1 << 16):
        unique, inverse = np.unique(values, return_inverse=True)
        return unique, inverse.reshape(-1)
    offsets = (values - low).astype(np.intp, copy=False)
    present = np.zeros(span, dtype=bool)
    present[offsets] = True
    slots = np.nonzero(present)[0]
    lookup = np.zeros(span, dtype=np.intp)
    lookup[slots] = np.arange(len(slots), dtype=np.intp)
    return (slots + low).astype(values.dtype, copy=False), np.take(lookup, offsets)


def narrowest(values: np.ndarray) -> np.ndarray:
    """Integer ``values`` in the smallest signed integer type that holds all of them (a copy;
    ``values`` itself when none is smaller than its own): the same values, for an array that is
    gathered millions of times over, at a fraction of the memory traffic."""
    low, high = (int(values.min()), int(values.max())) if len(values) else (0, 0)
    for dtype in (np.int8, np.int16, np.int32):
        if np.dtype(dtype).itemsize >= values.dtype.itemsize:
            break
        if np.iinfo(dtype).min <= low and high <= np.iinfo(dtype).max:
            return values.astype(dtype)
    return values


def isin_ids(values: np.ndarray, test: Any) -> np.ndarray:
    """``np.isin(values, test)`` of integer arrays, by a lookup table when the values span a small
    range (ids, codes): one gather instead of a sort or hash of every value."""
    values = np.asarray(values)
    test = np.asarray(test)
    if len(test) == 0:
        return np.zeros(values.shape, dtype=bool)
    if len(values) == 0 or values.dtype.kind not in "iu" or test.dtype.kind not in "iu":
        return np.isin(values, test)
    low, high = int(values.min()), int(values.max())
    span = high - low + 1
    if span > 4 * len(values) + (1 << 16):
        return np.isin(values, test)
    table = np.zeros(span, dtype=bool)
    inside = test[(test >= low) & (test <= high)].astype(np.int64)
    table[inside - low] = True
    offsets = values if low == 0 else values - low
    return np.take(table, offsets.astype(np.intp, copy=False))
