"""The recorder's in-memory rows, turned into Parquet parts.

The recorder keeps its two big tables as flat lists of ints (see
:mod:`warptrace.record.session`): an event row is :data:`EVENT_ROW` (``kind`` and ``dim``
as codes into string tables), an access row is :data:`ACCESS_ROW` (``arg``/``field`` as
codes). :func:`int_rows` turns such a list into an ``(n, width)`` int64 matrix in one C
pass; :class:`PartSink` turns a flushed batch (those lists, or int64 arrays already
converted, and the row lists of the other tables) into one part per table.

No Warp here: the same code writes parts inside the recorded process (the writer thread,
or synchronously) and in the trace-writer process (:mod:`warptrace.trace.sink`).
"""

from __future__ import annotations

import functools
import hashlib
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from warptrace.trace import schema as _schema
from warptrace.trace.schema import LAUNCH
from warptrace.trace.writer import TraceWriter

if TYPE_CHECKING:
    import pyarrow as pa

# In-memory rows of the two big tables (all ints).
EVENT_ROW = (
    "seq", "kind", "tape", "recorded", "phase", "adjoint", "executed", "site", "kernel",
    "thread", "t_ns", "parent", "array_id", "ref_id", "dim",
)  # fmt: skip
EVENT_WIDTH = len(EVENT_ROW)
_KIND, _RECORDED, _ADJOINT = EVENT_ROW.index("kind"), EVENT_ROW.index("recorded"), EVENT_ROW.index("adjoint")
ACCESS_ROW = ("seq", "array_id", "alloc_id", "role", "flags", "arg", "field")
ACCESS_WIDTH = len(ACCESS_ROW)
_CODED = ("kind", "dim", "arg", "field")  # int codes into a string table in memory


# numpy dtype of each integer/bool column of the two rows (pyarrow's to_pandas_dtype() would
# import numpy.ma, 6 ms, at the first flush). Built at the first write: importing this module
# does not import pyarrow (see schema.SCHEMAS).
@functools.cache
def _int_dtypes(table: str) -> dict[str, np.dtype[Any]]:
    row = EVENT_ROW if table == "events" else ACCESS_ROW
    schema = _schema.SCHEMAS[table]
    return {name: np.dtype(str(schema.field(name).type)) for name in row if name not in _CODED}


# (seq, value, detail) of the events that have a value or a detail; a detail is its text,
# or a small host transfer's (bytes, how) whose digest the writer computes (host_transfer_text)
Extra = list[tuple[int, "float | None", "str | tuple[bytes, int] | None"]]

# ``how`` of a deferred host transfer detail: a read's is whether it is a zero-copy view
# (False/True, 0/1), a write's HOST_WRITE
HOST_WRITE = 2


def host_detail(direction: str, nbytes: int, digest: str | None, view: bool) -> str:
    """The ``detail`` JSON of a host transfer event ("read" or "write"), formatted directly:
    the text ``json.dumps`` gives for ``{"view": true (a zero-copy read only), "host",
    "nbytes", "digest"}`` (json.dumps cost ~1.5 µs of a read's ~6 µs)."""
    head = '"view": true, ' if view else ""
    quoted = "null" if digest is None else '"' + digest + '"'
    return f'{{{head}"host": "{direction}", "nbytes": {nbytes}, "digest": {quoted}}}'


def host_transfer_text(detail: tuple[bytes, int]) -> str:
    """The detail text of a small host transfer the compiled recorder left as (the bytes
    transferred, ``how``: a read's zero-copy flag, or :data:`HOST_WRITE`): hashing them here,
    in the trace writer, costs the program's thread a copy of the bytes instead of the digest
    (~3,500 of the ~10,800 instructions a 16-float ``numpy()`` added). The same text as
    ``hostdata.transfer_detail``."""
    data, how = detail
    digest = hashlib.blake2b(data, digest_size=8).hexdigest()
    if how == HOST_WRITE:
        return host_detail("write", len(data), digest, False)
    return host_detail("read", len(data), digest, bool(how))


def detail_text(detail: Any) -> str:
    """An Extra detail as the text the events table holds."""
    return host_transfer_text(detail) if detail.__class__ is tuple else str(detail)


# One flush: ((table, rows), ...) in WRITE_ORDER (other tables, such as numerics, in
# batches of their own); "events" holds (flat EVENT_ROW list, extra), the others flat row
# lists. Dimension tables come first: a reader never sees an event whose site or array
# is missing.
Batch = tuple[tuple[str, Any], ...]
WRITE_ORDER = ("sites", "kernels", "kernel_args", "allocs", "arrays", "accesses", "events")


def int_rows(
    buf: Sequence[int] | np.ndarray | bytes, width: int, note: Callable[[BaseException], None]
) -> np.ndarray:
    """The flat list as an ``(n, width)`` int64 matrix (one C pass over the list; an int64
    array is only reshaped, and native int64 bytes, what the writer thread packs for the
    trace-writer process (:func:`warptrace.trace.sink.packed`), are only viewed).

    A value that is not an int (a recorder bug) is reported to ``note`` and written as -1."""
    if isinstance(buf, np.ndarray):
        return buf.reshape(-1, width)
    if isinstance(buf, (bytes, bytearray)):
        return np.frombuffer(buf, dtype=np.int64).reshape(-1, width)
    try:
        values = np.fromiter(buf, dtype=np.int64, count=len(buf))
    except (TypeError, ValueError, OverflowError) as exc:
        note(exc)
        values = np.array([_as_int(v) for v in buf], dtype=np.int64)
    return values.reshape(-1, width)


def event_matrix(
    ev: Sequence[int] | np.ndarray, disordered: bool, note: Callable[[BaseException], None]
) -> np.ndarray:
    """:func:`int_rows` of an event buffer, sorted by seq when rows were appended out of order
    (a copy's row is appended after its nested grad copy's)."""
    rows = int_rows(ev, EVENT_WIDTH, note)
    if disordered:
        rows = rows[np.argsort(rows[:, 0], kind="stable")]
    return rows


class PartSink:
    """Writes batches as Parquet parts through a :class:`TraceWriter`.

    ``kinds``, ``names`` and ``dim_texts`` are the string tables the coded columns index
    (append-only; a code is appended before any row that uses it); ``note`` hears of a
    value in an int row that is not an int (a recorder bug; written as -1). ``counts``:
    the events written, by kind, and the launches by direction and tape (the summary of a
    run, counted where the rows already are a matrix)."""

    def __init__(
        self,
        writer: TraceWriter,
        kinds: list[str],
        names: list[str],
        dim_texts: list[str],
        note: Callable[[BaseException], None],
    ) -> None:
        self.writer = writer
        self.kinds = kinds
        self.names = names
        self.dim_texts = dim_texts
        self.note = note
        self.counts: Counter[str] = Counter()

    def write(self, batch: Batch, disordered: bool) -> None:
        """Write a flushed batch; ``disordered``: its event rows are not in seq order."""
        # dimension tables first: a reader never sees an event whose site/array is missing
        writer = self.writer
        for table, buf in batch:
            if table == "events":
                rows, extra = buf
                if len(rows):
                    matrix = event_matrix(rows, disordered, self.note)
                    writer.write(table, self.event_columns(matrix, extra))
                    self.count(matrix)
            elif table == "accesses":
                if len(buf):
                    writer.write(table, self.access_columns(int_rows(buf, ACCESS_WIDTH, self.note)))
            elif buf:
                names = _schema.SCHEMAS[table].names
                width = len(names)
                writer.write(table, {name: buf[i::width] for i, name in enumerate(names)})

    def count(self, rows: np.ndarray) -> None:
        """Add written event rows to :attr:`counts` (what ``Recorder.summary`` reports)."""
        self.counts += event_counts(
            self.kinds, rows[:, _KIND], rows[:, _RECORDED] != 0, rows[:, _ADJOINT] != 0
        )

    def event_columns(self, rows: np.ndarray, extra: Extra) -> dict[str, Any]:
        import pyarrow as pa

        n = len(rows)
        dtypes = _int_dtypes("events")
        columns: dict[str, Any] = {}
        for i, name in enumerate(EVENT_ROW):
            column = rows[:, i]
            if name == "kind":
                columns[name] = decode(self.kinds, column)
            elif name == "dim":
                columns[name] = decode(self.dim_texts, column)
            else:
                columns[name] = pa.array(column.astype(dtypes[name]))
        value = np.zeros(n, dtype=np.float64)
        has_value = np.zeros(n, dtype=bool)
        detail_index = np.full(n, -1, dtype=np.int64)
        details: list[str] = []
        if extra:
            where = np.searchsorted(rows[:, 0], np.array([e[0] for e in extra], dtype=np.int64))
            with_value = [i for i, e in enumerate(extra) if e[1] is not None]
            if with_value:
                at = where[with_value]
                value[at] = [extra[i][1] for i in with_value]
                has_value[at] = True
            with_detail = [i for i, e in enumerate(extra) if e[2] is not None]
            if with_detail:
                detail_index[where[with_detail]] = np.arange(len(with_detail))
                details = [detail_text(extra[i][2]) for i in with_detail]
        columns["value"] = pa.array(value, mask=~has_value)
        columns["detail"] = decode(details, detail_index)
        return columns

    def access_columns(self, rows: np.ndarray) -> dict[str, Any]:
        import pyarrow as pa

        dtypes = _int_dtypes("accesses")
        columns: dict[str, Any] = {}
        for i, name in enumerate(ACCESS_ROW):
            if name in ("arg", "field"):
                columns[name] = decode(self.names, rows[:, i])
            else:
                columns[name] = pa.array(rows[:, i].astype(dtypes[name]))
        return columns


def event_counts(
    kinds: Sequence[str], codes: np.ndarray, recorded: np.ndarray, adjoint: np.ndarray
) -> Counter[str]:
    """A run's summary counts of event rows: per kind (``codes`` index ``kinds``; another
    code counts as ""), and the launches by direction and tape (``adjoint_launches``,
    ``recorded_launches``, ``untaped_launches``)."""
    counts: Counter[str] = Counter()
    present, numbers = np.unique(codes, return_counts=True)
    for code, number in zip(present.tolist(), numbers.tolist()):
        counts[kinds[code] if 0 <= code < len(kinds) else ""] += number
    if LAUNCH in kinds:
        launch = codes == list(kinds).index(LAUNCH)
        forward = launch & ~adjoint
        counts["adjoint_launches"] += int(np.count_nonzero(launch & adjoint))
        counts["recorded_launches"] += int(np.count_nonzero(forward & recorded))
        counts["untaped_launches"] += int(np.count_nonzero(forward & ~recorded))
    return counts


def event_counts_of_parts(folder: Path) -> Counter[str]:
    """:func:`event_counts` of the event parts written in ``folder`` (read back)."""
    import pyarrow as pa
    import pyarrow.parquet as pq  # ParquetFile: pq.read_table would import pyarrow.dataset (6 ms)

    files = sorted(str(f) for f in folder.glob("part-*.parquet"))
    if not files:
        return Counter()
    table = pa.concat_tables([pq.ParquetFile(f).read(columns=["kind", "recorded", "adjoint"]) for f in files])
    kinds, codes = np.unique(table.column("kind").to_numpy(zero_copy_only=False), return_inverse=True)
    recorded = table.column("recorded").to_numpy(zero_copy_only=False).astype(bool)
    adjoint = table.column("adjoint").to_numpy(zero_copy_only=False).astype(bool)
    return event_counts(kinds.tolist(), codes, recorded, adjoint)


def decode(texts: list[str], codes: np.ndarray) -> pa.Array:
    """String column from codes into ``texts`` (-1: null), without a Python object per row."""
    import pyarrow as pa

    table = pa.array(texts[:], type=pa.string())  # a snapshot: the list may grow meanwhile
    indices = codes.astype(np.int32)
    missing = indices < 0
    return table.take(pa.array(indices, mask=missing) if missing.any() else pa.array(indices))


def _as_int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return -1
