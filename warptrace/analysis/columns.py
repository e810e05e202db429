"""Model columns from the trace's Arrow tables: numpy arrays filled chunk by chunk, string
columns as codes into their distinct values, and the access rows of a graph-replay expansion
gathered from the recorded rows (:class:`AccessCopies`) instead of an Arrow table of copies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class AccessCopies:
    """The access rows of a graph-replay expansion (``analysis.replay.expand_replays``), not
    copied: row ``i`` is row ``rows[i]`` of ``recorded`` (the trace's own access rows, in stable seq
    order, ``arg`` and ``field`` dictionary-encoded, without the ``seq`` column, which was at
    position ``seq_at``) with seq ``seq[i]``; rows in seq order.
    The rows of expanded event ``e`` (``events`` in seq order) are ``event_start[e]:event_stop[e]``;
    ``used`` lists the recorded rows that some row is."""

    recorded: pa.Table
    rows: np.ndarray
    seq: np.ndarray
    seq_at: int
    event_start: np.ndarray
    event_stop: np.ndarray
    used: np.ndarray

    def table(self) -> pa.Table:
        """The rows as a table of the trace's access columns."""
        # the copies come from the C library's malloc, not Arrow's default (mimalloc) pool: with
        # transparent huge pages in madvise mode, mimalloc's first touches of these big blocks took
        # 0.8-1.2 s of system time on the drone trace (malloc: 0.3 s; see analysis.pages)
        pool = pa.system_memory_pool()
        table = pc.take(self.recorded, pa.array(self.rows), memory_pool=pool)
        return table.add_column(self.seq_at, "seq", pa.array(self.seq, type=pa.int64()))


def sorted_by(table: pa.Table, seq: np.ndarray) -> tuple[pa.Table, np.ndarray]:
    """``table`` and ``seq`` in stable ``seq`` order; no copy when already sorted (as the recorder writes)."""
    if len(seq) < 2 or bool(np.all(seq[1:] >= seq[:-1])):
        return table, seq
    order = np.argsort(seq, kind="stable")
    return table.take(order), seq[order]


def table_column(table: pa.Table, name: str, fill: Any, dtype: Any) -> np.ndarray:
    """A fresh, writable numpy array of ``dtype`` with the column's values (nulls -> ``fill``,
    or nan when ``fill`` is None): one allocation, filled chunk by chunk."""
    column = table.column(name)
    out = np.empty(len(column), dtype=dtype)
    pos = 0
    for chunk in column.chunks:
        if chunk.null_count and fill is not None:
            chunk = chunk.fill_null(fill)
        out[pos : pos + len(chunk)] = chunk.to_numpy(zero_copy_only=False)
        pos += len(chunk)
    return out


class CodedStrings:
    """A column of strings kept as codes into its distinct values: indexing it gives what an
    object array of the strings would (a ``str`` for a row, an object array for an index
    array or a slice), without a pointer per row."""

    __slots__ = ("codes", "values")

    def __init__(self, values: np.ndarray, codes: np.ndarray) -> None:
        self.values = values  # object array of the distinct strings
        self.codes = codes

    def __getitem__(self, key: Any) -> Any:
        return self.values[self.codes[key]]

    def __len__(self) -> int:
        return len(self.codes)


# Ranges of an index of rows that repeat an earlier range of it (the graph replays that copy an
# earlier one, ``Model.row_copies``): the positions outside them (``Model.decided_rows``) and the
# (start, stop, earlier start) of each range, in order.
RowRepeats = tuple[Union[np.ndarray, slice], list[tuple[int, int, int]]]


def take_rows(values: np.ndarray, rows: np.ndarray, repeats: RowRepeats | None = None) -> np.ndarray:
    """``values[rows]``: gathered at the positions outside ``repeats``, copied range by range
    (a memory copy each) into the ranges that repeat an earlier one."""
    if repeats is None:
        return values[rows]
    decided, copies = repeats
    out = np.empty(len(rows), dtype=values.dtype)
    out[decided] = values[rows[decided]]
    for start, stop, earlier in copies:
        out[start:stop] = out[earlier : earlier + stop - start]
    return out


def object_strings(
    column: pa.ChunkedArray,
    rows: np.ndarray | None = None,
    used: np.ndarray | None = None,
    repeats: RowRepeats | None = None,
) -> tuple[CodedStrings, np.ndarray]:
    """The column's strings (null -> ""; repeated values share one str object), and the code of
    each value in the smallest int type (equal codes <=> equal strings); of the column's rows
    ``rows`` in turn when given (``used``: the rows that occur in ``rows``, if known; ``repeats``:
    ranges of ``rows`` that repeat earlier ones, see :func:`take_rows`)."""
    if pa.types.is_dictionary(column.type) and column.num_chunks == 1:
        return dictionary_strings(column.chunk(0), rows, used, repeats)
    if rows is not None:
        column = column.take(pa.array(rows))
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if column.null_count:
        column = column.fill_null("")
    values = pc.unique(column)
    codes = pc.index_in(column, value_set=values).to_numpy(zero_copy_only=False)
    for dtype in (np.int8, np.int16):
        if len(values) <= np.iinfo(dtype).max:
            codes = codes.astype(dtype)
            break
    return CodedStrings(np.array(values.to_pylist(), dtype=object), codes), codes


def dictionary_strings(
    array: pa.DictionaryArray,
    rows: np.ndarray | None = None,
    used: np.ndarray | None = None,
    repeats: RowRepeats | None = None,
) -> tuple[CodedStrings, np.ndarray]:
    """:func:`object_strings` of a dictionary-encoded column (the capture expansion's copies),
    the same values and codes: the distinct strings in the order of their first row, from the
    dictionary and the rows' indices instead of hashing every row's string. With ``rows`` (and
    ``used``, the rows that occur in it), the slots of the rows are looked up in the array's,
    never gathered whole."""
    strings = [str(value) for value in array.dictionary.to_pylist()] + [""]  # last: null -> ""
    n_slots = len(strings)
    indices = array.indices
    if indices.null_count:
        indices = indices.fill_null(n_slots - 1)
    slots = indices.to_numpy(zero_copy_only=False)
    if rows is not None and used is None:
        slots, rows = slots[rows], None
    n_rows = len(slots) if rows is None else len(rows)
    # each slot's first row: in growing prefixes until every slot that occurs has been seen
    occurring = slots if rows is None or used is None else slots[used]
    present = int(np.count_nonzero(np.bincount(occurring, minlength=n_slots)))
    first = np.full(n_slots, n_rows, dtype=np.int64)
    size = 1 << 12
    while True:
        seen, at = np.unique(slots[:size] if rows is None else slots[rows[:size]], return_index=True)
        if len(seen) == present or size >= n_rows:
            first[seen] = at
            break
        size *= 8
    # slots of equal strings share a code ("" may be in the dictionary and stand for nulls)
    code_of_string: dict[str, int] = {}
    values: list[str] = []
    code_of_slot = np.zeros(n_slots, dtype=np.int64)
    for slot in np.argsort(first, kind="stable").tolist():
        if first[slot] == n_rows:
            break  # never occurs
        text = strings[slot]
        code = code_of_string.get(text)
        if code is None:
            code = code_of_string[text] = len(values)
            values.append(text)
        code_of_slot[slot] = code
    for dtype in (np.int8, np.int16, np.int32):
        if len(values) <= np.iinfo(dtype).max:
            break
    codes = np.take(code_of_slot.astype(dtype), slots)
    if rows is not None:
        codes = take_rows(codes, rows, repeats)
    return CodedStrings(np.array(values, dtype=object), codes), codes
