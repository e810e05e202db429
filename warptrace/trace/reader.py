"""Load a ``.wtrace`` directory into pyarrow tables, validating it on the way.

Every failure a user can cause (wrong path, truncated or corrupt part, unknown schema
version, missing table) becomes a :class:`~warptrace.errors.TraceError` with a one-line
message; the CLI turns it into exit status 2.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from warptrace.errors import TraceError
from warptrace.trace.schema import META_FILE, SCHEMAS, SUPPORTED_SCHEMA_VERSIONS, TABLES


@dataclass
class Trace:
    """A loaded trace: ``meta`` from meta.json and one pyarrow Table per schema table."""

    path: Path
    meta: dict[str, Any]
    tables: dict[str, pa.Table] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return bool(self.meta.get("complete"))

    @property
    def warp_version(self) -> str:
        return str(self.meta.get("warp_version") or "")

    def table(self, name: str) -> pa.Table:
        return self.tables[name]


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
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        supported = ", ".join(str(v) for v in SUPPORTED_SCHEMA_VERSIONS)
        raise TraceError(
            f"{path}: trace schema version {version!r} is not supported by this warptrace "
            f"(supported: {supported}); re-record it with this version"
        )
    return meta


def _read_table(path: Path, name: str) -> pa.Table:
    folder = path / name
    schema = SCHEMAS[name]
    if not folder.is_dir():
        raise TraceError(f"{path}: table '{name}' is missing ({folder} does not exist)")
    parts = sorted(p for p in folder.iterdir() if p.name.startswith("part-") and p.suffix == ".parquet")
    tables = []
    for part in parts:
        try:
            table = pq.read_table(part)
        except (OSError, pa.ArrowException) as exc:
            message = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
            raise TraceError(f"{part}: corrupt trace part ({message})") from None
        missing = [f.name for f in schema if f.name not in table.column_names]
        if missing:
            raise TraceError(f"{part}: corrupt trace part (missing columns: {', '.join(missing)})")
        try:
            tables.append(table.select(schema.names).cast(schema))
        except (pa.ArrowException, ValueError) as exc:
            raise TraceError(f"{part}: corrupt trace part (column types do not match: {exc})") from None
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables)


def read_trace(path: str | os.PathLike[str]) -> Trace:
    """Read and validate a trace directory."""
    trace_path = Path(path)
    if not trace_path.exists():
        raise TraceError(f"{trace_path}: no such trace")
    if not trace_path.is_dir():
        raise TraceError(f"{trace_path}: not a warptrace trace (a trace is a directory)")
    meta = _read_meta(trace_path)
    tables = {name: _read_table(trace_path, name) for name in TABLES}
    return Trace(path=trace_path, meta=meta, tables=tables)
