"""Load a ``.wtrace`` directory into pyarrow tables, validating it on the way.

Every failure a user can cause (wrong path, truncated or corrupt part, unknown schema
version, missing table, duplicated, foreign or swapped part, malformed ``meta.json``)
becomes a :class:`~warptrace.errors.TraceError` with a one-line message naming the file;
the CLI turns it into exit status 2. Part-level checks live here; row-level checks
(sequence numbers, counts, references, enum values) in :mod:`warptrace.trace.integrity`.

A trace marked incomplete (the run was killed) may end with a torn part: its last part of
a table may be unreadable. That part is dropped and the trace is cut to its consistent
prefix, with one :class:`~warptrace.errors.TraceWarning` (also kept in ``Trace.warnings``).

``read_trace(path, seq_range=(lo, hi))`` reads a *window*: the rows of the tables keyed by
event seq (events, accesses, numerics) with ``lo <= seq < hi``, and every row of the small
dimension tables (sites, kernels, kernel_args, allocs, arrays). Parts whose row-group
statistics put all their seqs outside the window are not read, so the memory is the window's,
not the trace's (``warptrace.analysis.chunks`` analyzes a long trace window by window).
The checks are those of a whole trace, except the row counts of ``meta.json`` (a window
holds fewer rows); ``Trace.seq_range`` says which window a trace is.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from warptrace.errors import TraceError, TraceWarning
from warptrace.trace.integrity import SEQ_TABLES, Parts, validate
from warptrace.trace.schema import (
    ADDED_COLUMNS,
    META_FILE,
    OPTIONAL_TABLES,
    PART_KEY,
    SCHEMAS,
    SUPPORTED_SCHEMA_VERSIONS,
    TABLES,
)

_PART_NAME = re.compile(r"part-(\d{5,})\.parquet")


@dataclass
class Trace:
    """A loaded trace: ``meta`` from meta.json and one pyarrow Table per schema table."""

    path: Path
    meta: dict[str, Any]
    tables: dict[str, pa.Table] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # damage tolerated in an incomplete trace
    # the window [lo, hi) of event seqs this trace holds (read_trace(seq_range=...)), None: all
    seq_range: tuple[int, int] | None = None

    @property
    def complete(self) -> bool:
        return bool(self.meta.get("complete"))

    @property
    def warp_version(self) -> str:
        return str(self.meta.get("warp_version") or "")

    def table(self, name: str) -> pa.Table:
        return self.tables[name]


def _is_count_map(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value.values()
    )


# key -> (check, what it should be); keys absent from meta.json are not checked
_META_TYPES: dict[str, tuple[Any, str]] = {
    "complete": (lambda v: isinstance(v, bool), "true or false"),
    "trace_id": (lambda v: isinstance(v, str) and v != "", "a non-empty string"),
    "exit_status": (
        lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool)),
        "an integer or null",
    ),
    "counts": (_is_count_map, "an object of row counts per table"),
    "parts": (_is_count_map, "an object of part counts per table"),
    "warp_version": (lambda v: v is None or isinstance(v, str), "a string"),
}


def _read_meta(path: Path) -> dict[str, Any]:
    meta_path = path / META_FILE
    if not meta_path.is_file():
        raise TraceError(f"{path}: not a warptrace trace (no {META_FILE})")
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TraceError(f"{meta_path}: unreadable ({exc.__class__.__name__}: {exc})") from None
    if not isinstance(meta, dict):
        raise TraceError(f"{meta_path}: unreadable (not a JSON object)")
    version = meta.get("schema_version")
    if version not in SUPPORTED_SCHEMA_VERSIONS or isinstance(version, bool):
        supported = ", ".join(str(v) for v in SUPPORTED_SCHEMA_VERSIONS)
        raise TraceError(
            f"{path}: trace schema version {version!r} is not supported by this warptrace "
            f"(supported: {supported}); re-record it with this version"
        )
    for key, (check, expected) in _META_TYPES.items():
        if key in meta and not check(meta[key]):
            raise TraceError(f"{meta_path}: malformed ('{key}' should be {expected}, not {meta[key]!r:.60})")
    return meta


def _part_facts(table: pa.Table | pa.Schema) -> dict[str, Any] | None:
    schema = table if isinstance(table, pa.Schema) else table.schema
    raw = (schema.metadata or {}).get(PART_KEY.encode())
    if raw is None:
        return None
    try:
        facts = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return facts if isinstance(facts, dict) else {}


def _corrupt_reason(part: Path, exc: Exception) -> str:
    try:
        with part.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(size - 4, 0))
            tail = handle.read(4)
    except OSError:
        tail = b""
    if tail != b"PAR1":
        return "not a complete Parquet file: truncated, or its footer is damaged"
    message = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
    return f"damaged data: {message}"


def _check_facts(part: Path, name: str, index: int, table: pa.Table, meta: dict[str, Any]) -> None:
    facts = _part_facts(table)
    trace_id = meta.get("trace_id")
    if facts is None:
        if trace_id is not None:  # this trace's writer labels every part
            raise TraceError(
                f"{part}: not a part of this trace (it carries no trace id; this trace is {trace_id})"
            )
        return  # an older trace: nothing to compare
    if not facts:
        raise TraceError(f"{part}: corrupt trace part (unreadable part metadata)")
    if facts.get("trace_id") != trace_id:
        raise TraceError(
            f"{part}: a part of another trace (trace id {facts.get('trace_id')}, this trace is {trace_id})"
        )
    if facts.get("table") != name:
        raise TraceError(
            f"{part}: holds a part of table '{facts.get('table')}', not of '{name}' (swapped tables?)"
        )
    if facts.get("part") != index:
        raise TraceError(f"{part}: is a copy of part {facts.get('part')} of '{name}' (duplicated part?)")
    if facts.get("rows") != table.num_rows:
        raise TraceError(f"{part}: holds {table.num_rows} rows, its metadata says {facts.get('rows')}")


class _WindowCache:
    """What reading one window of a trace learns about its parts and the next window reuses:
    each part's seq bounds, and the dimension tables' parts as read. Kept for one trace at a
    time (the last one read by window), per part file as it was (path, size, mtime): a window
    then costs the parts it reads, not a read of every part of the trace."""

    def __init__(self) -> None:
        self.trace: Path | None = None
        self.bounds: dict[tuple[Path, int, int], tuple[int, int] | None] = {}
        self.tables: dict[tuple[Path, int, int], pa.Table] = {}

    def key(self, trace: Path, part: Path) -> tuple[Path, int, int]:
        if self.trace != trace:
            self.trace, self.bounds, self.tables = trace, {}, {}
        stat = part.stat()
        return (part, stat.st_size, stat.st_mtime_ns)


_WINDOW_CACHE = _WindowCache()


def _seq_bounds(part: Path) -> tuple[int, int] | None:
    """(first, last) seq of a part, by its facts (``first_seq``/``last_seq``, written since
    schema 1 for events and accesses; only the footer is read), else by its ``seq`` column;
    (1, 0) for a part without rows; None when neither can be read."""
    try:
        facts = _part_facts(pq.read_schema(part)) or {}
        first, last = facts.get("first_seq"), facts.get("last_seq")
        if isinstance(first, int) and isinstance(last, int):
            return (first, last)
        bounds = pc.min_max(pq.read_table(part, columns=["seq"]).column("seq"))
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
    except (OSError, ValueError, KeyError, pa.ArrowException):
        return None
    return (1, 0) if low is None or high is None else (int(low), int(high))


def _outside(path: Path, part: Path, seq_range: tuple[int, int]) -> bool:
    """True when every ``seq`` of the part lies outside ``seq_range`` (False when its bounds
    cannot be read: the part is then read whole and checked as usual)."""
    try:
        key = _WINDOW_CACHE.key(path, part)
    except OSError:
        return False
    if key not in _WINDOW_CACHE.bounds:
        _WINDOW_CACHE.bounds[key] = _seq_bounds(part)
    bounds = _WINDOW_CACHE.bounds[key]
    if bounds is None:
        return False
    first, last = bounds
    return bool(last < seq_range[0] or first >= seq_range[1] or last < first)


def _read_part(path: Path, part: Path, cache: bool) -> pa.Table:
    """The part as read (``cache``: a dimension table's part, read once per trace by windows)."""
    if not cache:
        return pq.read_table(part, page_checksum_verification=True)
    key = _WINDOW_CACHE.key(path, part)
    table = _WINDOW_CACHE.tables.get(key)
    if table is None:
        table = _WINDOW_CACHE.tables[key] = pq.read_table(part, page_checksum_verification=True)
    return table


def _read_table(
    path: Path, name: str, meta: dict[str, Any], torn: list[str], seq_range: tuple[int, int] | None = None
) -> tuple[pa.Table, Parts]:
    """The concatenated table and where each part starts. A torn last part of an
    incomplete trace is dropped and described in ``torn``. With ``seq_range``, a table keyed
    by seq keeps the rows inside it (and skips the parts with none)."""
    folder = path / name
    schema = SCHEMAS[name]
    version = int(meta["schema_version"])
    if not folder.is_dir():
        raise TraceError(f"{path}: table '{name}' is missing ({folder} does not exist)")
    numbered = []
    for entry in folder.iterdir():
        match = _PART_NAME.fullmatch(entry.name)
        if match:
            numbered.append((int(match.group(1)), entry))
    numbered.sort()
    for expected, (index, _) in enumerate(numbered):
        if index != expected:
            raise TraceError(
                f"{folder / f'part-{expected:05d}.parquet'}: missing (the parts of '{name}' have a gap)"
            )
    tables: list[pa.Table] = []
    parts: Parts = []
    rows = 0
    windowed = seq_range is not None and name in SEQ_TABLES
    for index, part in numbered:
        if windowed and seq_range is not None and _outside(path, part, seq_range):
            continue
        try:
            table = _read_part(path, part, seq_range is not None and not windowed)
        except (OSError, pa.ArrowException) as exc:
            reason = _corrupt_reason(part, exc)
            if not meta.get("complete") and index == len(numbered) - 1:
                torn.append(f"{part} is torn ({reason}) and was dropped")
                break
            raise TraceError(f"{part}: corrupt trace part ({reason})") from None
        _check_facts(part, name, index, table, meta)
        if windowed and seq_range is not None and "seq" in table.column_names:
            seq = table.column("seq")
            inside = pc.and_(pc.greater_equal(seq, seq_range[0]), pc.less(seq, seq_range[1]))
            table = table.filter(inside)
        for column in schema:
            added = ADDED_COLUMNS.get((name, column.name))
            if column.name not in table.column_names and added is not None and version < added[0]:
                table = table.append_column(column, pa.array([added[1]] * table.num_rows, type=column.type))
        missing = [f.name for f in schema if f.name not in table.column_names]
        if missing:
            raise TraceError(f"{part}: corrupt trace part (missing columns: {', '.join(missing)})")
        try:
            tables.append(table.select(schema.names).cast(schema))
        except (pa.ArrowException, ValueError) as exc:
            first_line = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
            raise TraceError(
                f"{part}: corrupt trace part (column types do not match: {first_line})"
            ) from None
        parts.append((part, rows))
        rows += table.num_rows
    expected_parts = meta.get("parts", {}).get(name) if meta.get("complete") else None
    if expected_parts is not None and expected_parts != len(numbered):
        raise TraceError(f"{folder}: {len(numbered)} parts, but meta.json records {expected_parts}")
    if not tables:
        return schema.empty_table(), parts
    return pa.concat_tables(tables), parts


def read_trace(path: str | os.PathLike[str], seq_range: tuple[int, int] | None = None) -> Trace:
    """Read and validate a trace directory; with ``seq_range=(lo, hi)``, only the window of
    events ``lo <= seq < hi`` (and their accesses and summaries; see the module's docstring)."""
    trace_path = Path(path)
    if not trace_path.exists():
        raise TraceError(f"{trace_path}: no such trace")
    if not trace_path.is_dir():
        raise TraceError(f"{trace_path}: not a warptrace trace (a trace is a directory)")
    meta = _read_meta(trace_path)
    torn: list[str] = []
    tables: dict[str, pa.Table] = {}
    parts: dict[str, Parts] = {}
    torn_tables: set[str] = set()
    present = [name for name in OPTIONAL_TABLES if (trace_path / name).is_dir()]
    for name in TABLES + tuple(present):  # an optional table is in `tables` only when the run wrote it
        before = len(torn)
        tables[name], parts[name] = _read_table(trace_path, name, meta, torn, seq_range)
        if len(torn) > before:
            torn_tables.add(name)
    tables, damage = validate(trace_path, meta, tables, parts, torn_tables, window=seq_range is not None)
    notes = []
    if torn or damage:
        notes.append(f"{trace_path}: the incomplete trace is damaged at its end ({'; '.join(torn + damage)})")
        warnings.warn(TraceWarning(notes[0]), stacklevel=2)
    return Trace(path=trace_path, meta=meta, tables=tables, warnings=notes, seq_range=seq_range)
