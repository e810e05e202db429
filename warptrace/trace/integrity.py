"""Row-level integrity checks of a loaded trace (numpy/pyarrow, vectorized).

What is checked (each violation is one :class:`~warptrace.errors.TraceError` naming the
part that holds the offending row):

- ``events.seq`` non-negative and strictly increasing across the whole trace (a
  duplicated or misplaced part repeats or rewinds it);
- ids unique: ``arrays.array_id``, ``allocs.alloc_id``, ``kernels.kernel_id``, ``sites.site_id``;
- known enum values: event kinds, phases, access roles and flags, array and alloc kinds;
- references: every access names an event and an array, every
  array an allocation (or -1), every event a kernel and a site (or -1), every kernel
  argument a kernel;
- for a complete trace, the rows of each table against ``meta.json`` ``counts``;
- the optional ``numerics`` table (present only when the run wrote it): known ``what``
  values, every row names an event and an array.
- host-transfer facts (schema 4) in ``events.detail`` of value reads and copies: direction,
  a non-negative byte count and a 16-hex-digit digest or null.

A trace marked incomplete was cut by a kill: accesses written for events whose part never
made it are trimmed silently; broken references (a torn part was dropped by the reader)
cut the trace to the consistent prefix before the first offending ``seq``, reported as
damage (the reader warns). Checks needing metadata an older trace lacks are skipped.
"""

from __future__ import annotations

import bisect
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from warptrace.errors import TraceError
from warptrace.trace import schema as S

Parts = list[tuple[Path, int]]  # (part file, index of its first row in the concatenated table)

_KINDS = {
    ("events", "kind"): S.EVENT_KINDS,
    ("arrays", "kind"): (
        S.ARRAY_OWNED, S.ARRAY_VIEW, S.ARRAY_PTR_ALIAS, S.ARRAY_EXTERNAL, S.ARRAY_GRAD,
        S.ARRAY_PREEXISTING, S.ARRAY_OPAQUE,
    ),
    ("allocs", "kind"): (S.ALLOC_OWNED, S.ALLOC_EXTERNAL),
}  # fmt: skip
_RANGES = {
    ("events", "phase"): (S.FORWARD, S.BACKWARD),
    ("accesses", "role"): (S.ROLE_NONE, S.ROLE_READWRITE),
    ("accesses", "flags"): (0, 127),
}
_IDS = {"arrays": "array_id", "allocs": "alloc_id", "kernels": "kernel_id", "sites": "site_id"}
# (table, column) -> (referenced table, -1 allowed)
_REFS = {
    ("arrays", "alloc_id"): ("allocs", True),
    ("arrays", "site"): ("sites", True),
    ("arrays", "base_id"): ("arrays", True),
    ("arrays", "grad_of"): ("arrays", True),
    ("allocs", "site"): ("sites", True),
    ("kernel_args", "kernel_id"): ("kernels", False),
    ("events", "kernel"): ("kernels", True),
    ("events", "site"): ("sites", True),
    ("sites", "library_site"): ("sites", True),
    ("events", "array_id"): ("arrays", True),
    ("accesses", "array_id"): ("arrays", False),
    ("numerics", "array_id"): ("arrays", False),
    ("numerics", "owner"): ("arrays", True),
}
_SEQ_TABLES = ("events", "accesses")
# the tables whose rows are keyed by an event seq (what a window of a trace cuts)
SEQ_TABLES = (*_SEQ_TABLES, *S.OPTIONAL_TABLES)


class _Checker:
    def __init__(
        self, path: Path, meta: dict[str, Any], tables: dict[str, pa.Table], parts: dict[str, Parts]
    ):
        self.path = path
        self.meta = meta
        self.tables = tables
        self.parts = parts
        self.complete = bool(meta.get("complete"))
        self.lenient = not self.complete  # a killed run: cut broken references instead of failing
        self.damage: list[str] = []  # what was cut, one phrase per cause
        self._columns: dict[tuple[str, str], np.ndarray] = {}

    def column(self, table: str, name: str) -> np.ndarray:
        key = (table, name)
        if key not in self._columns:
            self._columns[key] = self.tables[table].column(name).to_numpy()
        return self._columns[key]

    def where(self, table: str, row: int) -> str:
        parts = self.parts[table]
        starts = [start for _, start in parts]
        index = bisect.bisect_right(starts, row) - 1
        return str(parts[index][0]) if index >= 0 else f"{self.path / table}"

    def fail(self, table: str, row: int, message: str) -> None:
        raise TraceError(f"{self.where(table, row)}: {message}")

    # ---------------------------------------------------------------- checks

    def seq_order(self) -> None:
        seq = self.column("events", "seq")
        if seq.size and seq[0] < 0:
            self.fail("events", 0, f"negative event seq {seq[0]}")
        bad = np.flatnonzero(seq[1:] <= seq[:-1])
        if bad.size:
            row = int(bad[0]) + 1
            self.fail(
                "events",
                row,
                f"event seq {seq[row]} after seq {seq[row - 1]} (sequence numbers must increase: "
                "a duplicated or misplaced part?)",
            )

    def unique_ids(self) -> None:
        for table, name in _IDS.items():
            ids = self.column(table, name)
            if ids.size < 2 or bool(np.all(ids[1:] > ids[:-1])):
                continue  # the writer's order: increasing, hence unique
            ordered = np.sort(ids, kind="stable")
            repeated = ordered[1:][ordered[1:] == ordered[:-1]]
            if repeated.size:
                row = int(np.flatnonzero(ids == repeated[0])[1])
                self.fail(table, row, f"{table}.{name} {repeated[0]} appears twice (a duplicated part?)")

    def enums(self) -> None:
        for (table, name), allowed in _KINDS.items():
            column = self.tables[table].column(name)
            present = set(pc.unique(column).to_pylist())
            unknown = sorted(str(v) for v in present - set(allowed))
            if unknown:
                value = None if unknown[0] == "None" else unknown[0]
                row = int(pc.index(column, value).as_py()) if value is not None else 0
                self.fail(table, row, f"unknown {table}.{name} value {unknown[0]!r}")
        for (table, name), (low, high) in _RANGES.items():
            bounds = pc.min_max(self.tables[table].column(name))  # no copy when in range
            if bounds["min"].as_py() is None or low <= bounds["min"].as_py() <= bounds["max"].as_py() <= high:
                continue
            values = self.column(table, name)
            bad = np.flatnonzero((values < low) | (values > high))
            if bad.size:
                row = int(bad[0])
                self.fail(table, row, f"unknown {table}.{name} value {values[row]}")

    def host_details(self) -> None:
        kinds = self.tables["events"].column("kind")
        transfer = pc.is_in(kinds, pa.array([S.VALUE_READ, S.COPY]))
        detail = self.tables["events"].column("detail")
        candidates = pc.and_(transfer, pc.match_substring(detail, '"host"'))
        for row in np.flatnonzero(candidates.to_numpy(zero_copy_only=False)).tolist():
            text = detail[row].as_py()
            try:
                facts = json.loads(text)
            except ValueError:
                facts = None
            if not isinstance(facts, dict) or not _host_facts_ok(facts):
                self.fail("events", row, f"malformed host-transfer detail {text[:80]!r}")

    def counts(self) -> None:
        counts = self.meta.get("counts")
        if not self.complete or not counts:
            return
        for table in S.OPTIONAL_TABLES:
            if counts.get(table) and table not in self.tables:
                raise TraceError(f"{self.path / table}: missing, but meta.json counts {counts[table]} rows")
        for table in S.ALL_TABLES:
            if table not in counts or table not in self.tables:
                continue
            rows = self.tables[table].num_rows
            if rows != counts[table]:
                raise TraceError(
                    f"{self.path / table}: {rows} rows, but meta.json counts {counts[table]} "
                    "(a part is missing, duplicated or from another trace)"
                )

    def broken_refs(self, table: str, name: str) -> np.ndarray:
        """Rows of ``table`` whose ``name`` names no row of the referenced table."""
        target, optional = _REFS[(table, name)]
        values = self.column(table, name)
        ids = self.column(target, _IDS[target])
        return np.flatnonzero(~_member(values, ids, optional))

    def refs(self, tables: tuple[str, ...]) -> dict[str, int]:
        """Check references from ``tables``; return the first broken row per table (lenient
        only: otherwise the first broken reference raises)."""
        first: dict[str, int] = {}
        for (table, name), (target, _) in _REFS.items():
            if table not in tables:
                continue
            bad = self.broken_refs(table, name)
            if not bad.size:
                continue
            row = int(bad[0])
            broken = f"{table}.{name} {self.column(table, name)[row]} names no {target} row"
            if not self.lenient:
                self.fail(table, row, f"{broken} (a part is missing or foreign?)")
            first[table] = min(first.get(table, row), row)
            if table in _SEQ_TABLES:
                self.damage.append(broken)
            else:  # drop the dangling dimension rows
                self.damage.append(f"{broken}: {bad.size} {table} row(s) dropped")
                keep = np.ones(self.tables[table].num_rows, dtype=bool)
                keep[bad] = False
                self.tables[table] = self.tables[table].filter(pa.array(keep))
                self._columns = {k: v for k, v in self._columns.items() if k[0] != table}
        return first

    def numerics(self) -> None:
        """The optional ``numerics`` table: known ``what`` values, every row names an event
        and an array (an incomplete trace drops rows past its last event)."""
        if "numerics" not in self.tables:
            return
        column = self.tables["numerics"].column("what")
        unknown = sorted(str(v) for v in set(pc.unique(column).to_pylist()) - set(S.NUMERICS_WHAT))
        if unknown:
            self.fail("numerics", 0, f"unknown numerics.what value {unknown[0]!r}")
        self.refs(("numerics",))
        self.trim_past_events("numerics", "summary of")

    def trim_past_events(self, table: str, what: str) -> None:
        """Rows of ``table`` must name an event: one naming a seq inside the trace, or any in
        a complete trace, is damage; an incomplete trace (killed between the parts of one
        flush) drops the rows past its last event."""
        seq = self.column(table, "seq")
        events = self.column("events", "seq")
        dangling = np.flatnonzero(~_member(seq, events))
        if not dangling.size:
            return
        last = int(events[-1]) if events.size else -1
        inside = dangling[seq[dangling] <= last]
        if self.complete or inside.size:
            row = int((inside if inside.size else dangling)[0])
            self.fail(table, row, f"{what} event seq {seq[row]}, which is not in the trace")
        self.tables[table] = self.tables[table].filter(pc.less_equal(self.tables[table].column("seq"), last))
        self._columns = {k: v for k, v in self._columns.items() if k[0] != table}


def _member(values: np.ndarray, ids: np.ndarray, optional: bool = False) -> np.ndarray:
    """``np.isin(values, ids)`` (``| values == -1`` when ``optional``); a bitmap indexed by
    the values themselves when the ids are dense enough (the usual case)."""
    if not values.size:
        return np.ones(0, dtype=bool)
    low, high = int(values.min()), int(values.max())
    top = int(ids.max()) if ids.size else -1
    if ids.size and int(ids.min()) >= 0 and top < 8 * (ids.size + values.size) + 1024:
        bitmap = np.zeros(top + 2, dtype=bool)  # the last slot stands for -1 (numpy's index -1)
        bitmap[ids] = True
        bitmap[-1] = optional
        if low >= -1 and high <= top:
            return bitmap[values]
        clipped = np.where((values < -1) | (values > top), top + 1, values)
        bitmap[top + 1] = False
        member = bitmap[clipped]
        if optional:
            member |= values == -1
        return member
    member = np.isin(values, ids)
    if optional:
        member |= values == -1
    return member


_DIGEST = re.compile(r"[0-9a-f]{16}")


def _host_facts_ok(facts: dict[str, Any]) -> bool:
    nbytes, digest = facts.get("nbytes"), facts.get("digest")
    return (
        facts.get("host") in (S.HOST_READ, S.HOST_WRITE)
        and isinstance(nbytes, int)
        and not isinstance(nbytes, bool)
        and nbytes >= 0
        and (digest is None or (isinstance(digest, str) and _DIGEST.fullmatch(digest) is not None))
    )


def validate(
    path: Path,
    meta: dict[str, Any],
    tables: dict[str, pa.Table],
    parts: dict[str, Parts],
    torn: set[str],
    window: bool = False,
) -> tuple[dict[str, pa.Table], list[str]]:
    """Check ``tables``; return them (cut to the consistent prefix for an incomplete
    trace) and what was cut, one phrase per cause. ``window``: the tables keyed by seq hold
    a window of the trace (``read_trace(seq_range=...)``), so their row counts are not
    compared with ``meta.json``'s."""
    checker = _Checker(path, meta, dict(tables), parts)
    checker.seq_order()
    checker.unique_ids()
    checker.enums()
    checker.host_details()
    if not window:
        checker.counts()
    damage = checker.damage
    checker.refs(("arrays", "allocs", "kernel_args"))
    cutoff: int | None = None
    if "accesses" in torn:  # the accesses of the events after the kept ones are gone
        acc_seq = checker.column("accesses", "seq")
        cutoff = int(acc_seq.max()) + 1 if acc_seq.size else 0
    first = checker.refs(_SEQ_TABLES)
    for table, row in first.items():
        seq = int(checker.column(table, "seq")[row])
        cutoff = seq if cutoff is None else min(cutoff, seq)
    checker.trim_past_events("accesses", "access to")
    checker.numerics()
    if cutoff is not None:
        for table in _SEQ_TABLES + tuple(t for t in S.OPTIONAL_TABLES if t in checker.tables):
            checker.tables[table] = checker.tables[table].filter(
                pc.less(checker.tables[table].column("seq"), cutoff)
            )
        damage.append(f"analyzing the events before seq {cutoff}")
    return checker.tables, damage
