"""The trace model the rules read: columns as numpy arrays plus a few derived indexes.

Built once per analysis from a :class:`~warptrace.trace.reader.Trace`. Everything here
is derived from the tables alone; nothing imports Warp. Big per-event data stays in
numpy columns (a million launches must fit in memory and load in seconds); small
tables (arrays, sites, kernels, tapes) become dataclasses.

Conventions used by every rule:

- ``ev`` is an *event index* (row in the events columns, sorted by seq); ``seq`` is
  the event's global sequence number.
- ``accesses_of(ev)`` gives the rows of the accesses columns for one event.
- ``backward_after(tape, seq)`` is the seq of the first ``backward_begin`` of ``tape``
  after ``seq`` with no ``tape_reset`` in between: the backward that will replay an
  event recorded at ``seq``. ``None`` when the tape is never backpropagated.
"""

from __future__ import annotations

import bisect
import json
import linecache
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from warptrace.analysis.columns import AccessCopies, object_strings, sorted_by, table_column, take_rows
from warptrace.analysis.findings import Location
from warptrace.analysis.tape_table import TapeInfo, tape_table
from warptrace.kernel_source import KERNEL, FunctionSource, KernelSource
from warptrace.kernel_source import build as build_source_model
from warptrace.trace import schema as S
from warptrace.trace.reader import Trace

EVENT_KIND_CODES = S.EVENT_KIND_CODES  # re-exported for rules
K = EVENT_KIND_CODES  # short alias for rules: K[S.LAUNCH]


def _version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


@dataclass
class ArrayInfo:
    array_id: int
    alloc_id: int
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    itemsize: int
    dtype: str
    device: str
    kind: str
    requires_grad: bool
    retain_grad: bool
    grad_of: int
    base_id: int
    seq: int
    site: int
    label: str

    @cached_property
    def size(self) -> int:
        return int(np.prod(self.shape)) if self.shape else 0

    @cached_property
    def hull(self) -> tuple[int, int]:
        """Byte range [lo, hi) covered by the view (exact for contiguous views)."""
        lo = hi = self.offset
        for extent, stride in zip(self.shape, self.strides):
            if extent <= 0:
                return (self.offset, self.offset)
            span = (extent - 1) * stride
            if span < 0:
                lo += span
            else:
                hi += span
        return (lo, hi + self.itemsize)

    @cached_property
    def contiguous(self) -> bool:
        expected = self.itemsize
        for extent, stride in zip(reversed(self.shape), reversed(self.strides)):
            if extent > 1 and stride != expected:
                return False
            expected *= extent
        return True

    def element_offsets(self, limit: int = 1 << 20) -> np.ndarray | None:
        """Byte offsets of every element, or None when there are more than ``limit``."""
        if self.size > limit:
            return None
        offsets = np.array([self.offset], dtype=np.int64)
        for extent, stride in zip(self.shape, self.strides):
            offsets = (offsets[:, None] + np.arange(extent, dtype=np.int64)[None, :] * stride).ravel()
        return offsets


def overlaps(a: ArrayInfo, b: ArrayInfo) -> bool:
    """True when the two views share at least one byte: hull test, then exact for strided views."""
    if a.alloc_id < 0 or b.alloc_id < 0 or a.alloc_id != b.alloc_id:
        return False
    (alo, ahi), (blo, bhi) = a.hull, b.hull
    if ahi <= blo or bhi <= alo:
        return False
    if a.contiguous and b.contiguous:
        return True
    if a.array_id == b.array_id:
        return True
    offs_a, offs_b = a.element_offsets(), b.element_offsets()
    if offs_a is None or offs_b is None:
        return True  # too large to enumerate: the hulls overlap, assume the worst
    # element x of a and y of b share a byte when y > x - b.itemsize and y < x + a.itemsize:
    # find, for every x, the first y above the lower bound and test the upper one
    starts_b = np.sort(offs_b)
    idx = np.searchsorted(starts_b, offs_a - b.itemsize, side="right")
    found = idx < len(starts_b)
    return bool(np.any(starts_b[idx[found]] < offs_a[found] + a.itemsize))


@dataclass
class KernelArg:
    index: int
    name: str
    type: str
    field: str
    is_array: bool
    read: bool
    write: bool
    store: bool
    accumulate: bool
    write_line: int
    read_line: int


@dataclass
class KernelInfo:
    kernel_id: int
    key: str
    module: str
    file: str
    line: int
    source: str
    enable_backward: bool
    custom_grad: list[str]
    custom_replay: list[str]
    native_snippets: bool
    analysis: str
    args: list[KernelArg] = field(default_factory=list)

    source_json: str = ""  # the stored kernel-source model (schema >= 2), "" before

    @cached_property
    def source_model(self) -> KernelSource:
        """The kernel-source model: stored by the recorder, or rebuilt from ``source`` for
        traces written before the model was stored (schema version 1) or in an older model
        layout (see ``MODEL_VERSION``)."""
        stored = KernelSource.from_json(self.source_json)
        if stored is not None:
            return stored
        return build_source_model(FunctionSource(KERNEL, self.key, self.file, self.line, self.source))

    def arg(self, name: str, field_path: str = "") -> KernelArg | None:
        for arg in self.args:
            if arg.name == name and arg.field == field_path:
                return arg
        return None


class Model:
    """Columns and indexes over one trace."""

    def __init__(self, trace: Trace, accesses: AccessCopies | None = None) -> None:
        """``accesses``: the access rows of a graph-replay expansion (:func:`~warptrace.analysis.
        replay.expand_replays`), gathered from the recorded rows; ``trace`` then has no
        ``accesses`` table, and the model's columns are its only copy of the rows."""
        self.trace = trace
        # Views other layers derive from this model (the dataflow, views rules share), kept
        # here so they are freed with it. (A module-level WeakKeyDictionary keyed by the
        # model cannot do that: its values refer to the model and keep it alive forever.)
        self.derived: dict[str, Any] = {}
        self.meta: dict[str, Any] = trace.meta
        self.warp_version: tuple[int, ...] = _version_tuple(trace.warp_version or "0")
        ev = trace.tables["events"]
        ev, _ = sorted_by(ev, ev.column("seq").to_numpy())

        self.seq = table_column(ev, "seq", -1, np.int64)
        # vectorized EVENT_KIND_CODES.get(kind, -1): EVENT_KIND_CODES is the position in EVENT_KINDS
        kind_codes = pc.index_in(ev.column("kind"), value_set=pa.array(S.EVENT_KINDS, type=pa.string()))
        self.kind = kind_codes.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int16)
        self.tape = table_column(ev, "tape", -1, np.int64)
        self.recorded = table_column(ev, "recorded", False, bool)
        self.phase = table_column(ev, "phase", 0, np.int8)
        self.adjoint = table_column(ev, "adjoint", False, bool)
        self.executed = table_column(ev, "executed", True, bool)
        self.site = table_column(ev, "site", -1, np.int64)
        self.kernel = table_column(ev, "kernel", -1, np.int64)
        self.thread = table_column(ev, "thread", 0, np.int64)
        self.parent = table_column(ev, "parent", -1, np.int64)
        self.array_id = table_column(ev, "array_id", -1, np.int64)
        self.ref_id = table_column(ev, "ref_id", -1, np.int64)
        self.value = table_column(ev, "value", None, np.float64)  # nulls -> nan
        # the recorded seq of each event: the copies of a captured event at each graph replay
        # share it (analysis.replay), and so do their access rows; elsewhere the event's own seq
        self.orig_seq = (
            table_column(ev, "orig_seq", -1, np.int64) if "orig_seq" in ev.column_names else self.seq.copy()
        )
        # per event: the seq of the capture_launch whose copy it is (analysis.replay), else -1
        self.replay = (
            table_column(ev, "replay", -1, np.int64)
            if "replay" in ev.column_names
            else np.full(len(self.seq), -1, dtype=np.int64)
        )
        self._detail = ev.column("detail")
        self._dim = ev.column("dim")
        self.n_events = len(self.seq)

        rows: np.ndarray | None = None  # the rows of `acc` each model row is (None: all, in order)
        used: np.ndarray | None = None
        if accesses is None:
            acc = trace.tables["accesses"]
            acc_seq = table_column(acc, "seq", -1, np.int64)
            acc, self.acc_seq = sorted_by(acc, acc_seq)
        else:  # a replay's copies: gathered from the recorded rows, in numpy
            acc, rows, self.acc_seq, used = accesses.recorded, accesses.rows, accesses.seq, accesses.used

        # accesses of event ev are rows acc_start[ev]:acc_stop[ev]
        if accesses is not None and len(accesses.event_stop) == self.n_events:
            self.acc_start, self.acc_stop = accesses.event_start, accesses.event_stop  # the same, counted
        else:
            self.acc_start = np.searchsorted(self.acc_seq, self.seq, side="left")
            self.acc_stop = np.searchsorted(self.acc_seq, self.seq, side="right")
        # a graph replay copying an earlier one has its template's rows: copied, not gathered
        repeats = (self.decided_rows, self.row_copies) if rows is not None and self.row_copies else None

        def column(name: str, fill: Any, dtype: Any) -> np.ndarray:
            values = table_column(acc, name, fill, dtype)
            return values if rows is None else take_rows(values, rows, repeats)

        self.acc_array = column("array_id", -1, np.int64)
        self.acc_alloc = column("alloc_id", -1, np.int64)
        self.acc_role = column("role", 0, np.int8)
        self.acc_flags = column("flags", 0, np.int16)
        # acc_arg_code / acc_field_code: small non-negative ints, equal codes <=> equal strings
        self.acc_arg, self.acc_arg_code = object_strings(acc.column("arg"), rows, used, repeats)
        self.acc_field, self.acc_field_code = object_strings(acc.column("field"), rows, used, repeats)

        self.arrays: dict[int, ArrayInfo] = {}
        for row in trace.tables["arrays"].to_pylist():
            info = ArrayInfo(
                array_id=row["array_id"],
                alloc_id=row["alloc_id"] if row["alloc_id"] is not None else -1,
                offset=row["offset"] or 0,
                shape=tuple(row["shape"] or ()),
                strides=tuple(row["strides"] or ()),
                itemsize=row["itemsize"] or 0,
                dtype=row["dtype"] or "",
                device=row["device"] or "",
                kind=row["kind"] or "",
                requires_grad=bool(row["requires_grad"]),
                retain_grad=bool(row["retain_grad"]),
                grad_of=row["grad_of"] if row["grad_of"] is not None else -1,
                base_id=row["base_id"] if row["base_id"] is not None else -1,
                seq=row["seq"] if row["seq"] is not None else -1,
                site=row["site"] if row["site"] is not None else -1,
                label=row["label"] or "",
            )
            self.arrays[info.array_id] = info
        self.grad_of_owner: dict[int, int] = {}  # owner array_id -> its (first) grad array_id
        for info in self.arrays.values():
            if info.grad_of >= 0:
                self.grad_of_owner.setdefault(info.grad_of, info.array_id)

        self.sites: dict[int, dict[str, Any]] = {
            row["site_id"]: row for row in trace.tables["sites"].to_pylist()
        }

        self.kernels: dict[int, KernelInfo] = {}
        for row in trace.tables["kernels"].to_pylist():
            self.kernels[row["kernel_id"]] = KernelInfo(
                kernel_id=row["kernel_id"],
                key=row["key"] or "",
                module=row["module"] or "",
                file=row["file"] or "",
                line=row["line"] or 0,
                source=row["source"] or "",
                enable_backward=row["enable_backward"] is not False,
                custom_grad=_json_list(row["custom_grad"]),
                custom_replay=_json_list(row["custom_replay"]),
                native_snippets=bool(row["native_snippets"]),
                analysis=row["analysis"] or "",
                source_json=row.get("source_model") or "",
            )
        for row in trace.tables["kernel_args"].to_pylist():
            kernel = self.kernels.get(row["kernel_id"])
            if kernel is not None:
                kernel.args.append(
                    KernelArg(
                        index=row["index"],
                        name=row["name"] or "",
                        type=row["type"] or "",
                        field=row["field"] or "",
                        is_array=bool(row["is_array"]),
                        read=bool(row["read"]),
                        write=bool(row["write"]),
                        store=bool(row["store"]),
                        accumulate=bool(row["accumulate"]),
                        write_line=row["write_line"] if row["write_line"] is not None else -1,
                        read_line=row["read_line"] if row["read_line"] is not None else -1,
                    )
                )

        self.tapes: dict[int, TapeInfo] = tape_table(self.tape, self.kind, self.seq)

    # ------------------------------------------------------------ events
    def ev_of_seq(self, seq: int) -> int:
        index = int(np.searchsorted(self.seq, seq))
        if index >= self.n_events or self.seq[index] != seq:
            raise KeyError(seq)
        return index

    def accesses_of(self, ev: int) -> range:
        return range(int(self.acc_start[ev]), int(self.acc_stop[ev]))

    def detail(self, ev: int) -> Any:
        text = self._detail[ev].as_py()
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return None

    def declared_arrays(self, ev: int) -> list[int]:
        """The array ids a ``tape.record_func(backward, arrays=...)`` event declares."""
        detail = self.detail(ev)
        ids = detail.get("arrays") if isinstance(detail, dict) else None
        return [int(i) for i in ids or () if isinstance(i, int)]

    def detail_texts(self, evs: np.ndarray) -> list[str | None]:
        """The raw ``detail`` JSON text of each event of ``evs`` (None where absent), in one pass."""
        if len(evs) == 0:
            return []
        texts: list[str | None] = self._detail.take(pa.array(np.asarray(evs, dtype=np.int64))).to_pylist()
        return texts

    def events_of_kind(self, *kinds: str) -> np.ndarray:
        codes = [K[k] for k in kinds]
        return np.nonzero(np.isin(self.kind, codes))[0]

    @cached_property
    def dim_code(self) -> np.ndarray:
        """Per event, a code of its launch ``dim`` string: equal codes <=> equal strings; -1 for null."""
        column = self._dim
        values = pc.unique(column).drop_null()
        codes = pc.index_in(column, value_set=values).fill_null(-1)
        return codes.to_numpy(zero_copy_only=False).astype(np.int64)

    @cached_property
    def replay_runs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The graph replays as runs of events (the copies one ``capture_launch`` made, in event
        order): per run its first event, its stop (one past its last event), and its template:
        the first run that copies the same recorded events (``orig_seq``) in the same order, and
        so has the same access rows in the same order (the run itself when it is the first).
        Empty arrays without replays."""
        evs = np.nonzero(self.replay >= 0)[0]
        if len(evs) == 0:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty
        cuts = np.nonzero((np.diff(self.replay[evs]) != 0) | (np.diff(evs) != 1))[0] + 1
        first = evs[np.concatenate(([0], cuts))].astype(np.int64)
        stop = np.append(evs[cuts - 1] + 1, evs[-1] + 1).astype(np.int64)
        template = np.arange(len(first), dtype=np.int64)
        seen: dict[bytes, int] = {}
        for run, (a, b) in enumerate(zip(first.tolist(), stop.tolist())):
            template[run] = seen.setdefault(self.orig_seq[a:b].tobytes(), run)
        return first, stop, template

    @cached_property
    def row_copies(self) -> list[tuple[int, int, int]]:
        """(first row, stop row, first row of the template) of each graph replay that copies an
        earlier one (:attr:`replay_runs`): its access rows are the template's, in the same
        order, with other seqs, so what is computed from an event's own rows (a mask that only
        looks at the rows of the same event) is the same for both."""
        first, stop, template = self.replay_runs
        copies = np.nonzero(template != np.arange(len(template)))[0]
        row_first = self.acc_start[first]
        size = self.acc_stop[stop - 1] - row_first
        copies = copies[size[copies] == size[template[copies]]]
        starts = row_first[copies]
        return list(
            zip(starts.tolist(), (starts + size[copies]).tolist(), row_first[template[copies]].tolist())
        )

    def outside_row_copies(self) -> np.ndarray:
        """Per access row: not in a replay of :attr:`row_copies` (in the template, or elsewhere)."""
        outside = np.ones(len(self.acc_seq), dtype=bool)
        for start, stop, _ in self.row_copies:
            outside[start:stop] = False
        return outside

    @cached_property
    def decided_rows(self) -> np.ndarray | slice:
        """The access rows where a per-row answer that an event's own rows decide has to be
        worked out: those outside :attr:`row_copies` (ascending), whose answers the copies then
        take (:meth:`fill_row_copies`); ``slice(None)`` (every row) where no replay is a copy."""
        if not self.row_copies:
            return slice(None)
        return np.nonzero(self.outside_row_copies())[0]

    def fill_row_copies(self, values: np.ndarray) -> None:
        """Per-row ``values`` of the rows in replays of :attr:`row_copies` set to their template's."""
        for start, stop, template in self.row_copies:
            values[start:stop] = values[template : template + stop - start]

    @cached_property
    def acc_near_ev(self) -> np.ndarray:
        """Per access row, ``min(np.searchsorted(seq, acc_seq), n_events - 1)``: the index of its event
        when it has one (else of the next event, or the last), counted in linear time from
        ``acc_stop``. Shared (the dataflow's ``acc_ev``): do not modify.

        Where the seqs are the event positions (a trace with graph replays: ``analysis.replay``
        renumbers them) and every access row's seq is an event's, that index is the row's seq:
        ``acc_seq`` itself, shared instead of a 50 MiB column counted per 6.7M rows."""
        n = self.n_events
        if (
            len(self.acc_seq)
            and int(self.acc_seq[0]) >= 0
            and int(self.acc_seq[-1]) < n
            and int(self.seq[0]) == 0
            and int(self.seq[-1]) == n - 1
            and bool(np.all(np.diff(self.seq) == 1))
        ):
            return self.acc_seq  # acc_seq ascends: its first and last bound every row's
        counts = np.bincount(self.acc_stop, minlength=len(self.acc_seq) + 1)[: len(self.acc_seq)]
        index = np.cumsum(counts, dtype=np.int64)
        np.minimum(index, max(self.n_events - 1, 0), out=index)
        return index

    @cached_property
    def acc_ev(self) -> np.ndarray:
        """Event index of every access row (-1 when its seq has no event row). Where every row
        has its event (as recorded), this is :attr:`acc_near_ev` itself, not a 50 MiB copy per
        6.7M rows: do not modify."""
        if self.n_events == 0:
            return np.full(len(self.acc_seq), -1, dtype=np.int64)
        index = self.acc_near_ev
        if index is self.acc_seq:  # the seqs are the event positions and bound every row's seq:
            return index  # each row's seq is its event's (seq[acc_seq] == acc_seq)
        has_event = self.seq[index] == self.acc_seq
        if has_event.all():
            return index
        return np.where(has_event, index, -1).astype(np.int64, copy=False)

    def backward_after_many(self, tape_ids: np.ndarray, seqs: np.ndarray) -> np.ndarray:
        """Vectorized :meth:`backward_after`: the backward seq per (tape, seq) pair, -1 for none."""
        tape_ids = np.asarray(tape_ids, dtype=np.int64)
        seqs = np.asarray(seqs, dtype=np.int64)
        result = np.full(len(seqs), -1, dtype=np.int64)
        order = np.argsort(tape_ids, kind="stable")
        unique, starts = np.unique(tape_ids[order], return_index=True)
        stops = np.append(starts[1:], len(order))
        for tape_id, start, stop in zip(unique.tolist(), starts.tolist(), stops.tolist()):
            tape = self.tapes.get(tape_id)
            if tape is None or not tape.backward_begins:
                continue
            rows = order[start:stop]
            begins = np.asarray(tape.backward_begins, dtype=np.int64)
            i = np.searchsorted(begins, seqs[rows], side="right")
            has = i < len(begins)
            begin = np.where(has, begins[np.minimum(i, len(begins) - 1)], -1)
            if tape.resets:
                resets = np.asarray(tape.resets, dtype=np.int64)
                j = np.searchsorted(resets, seqs[rows], side="right")
                never = np.iinfo(np.int64).max
                reset = np.where(j < len(resets), resets[np.minimum(j, len(resets) - 1)], never)
                has &= ~(reset < begin)
            result[rows] = np.where(has, begin, -1)
        return result

    def backward_after(self, tape_id: int, seq: int) -> int | None:
        """Seq of the backward that will replay an event recorded on ``tape_id`` at ``seq``."""
        tape = self.tapes.get(tape_id)
        if tape is None:
            return None
        i = bisect.bisect_right(tape.backward_begins, seq)
        if i >= len(tape.backward_begins):
            return None
        begin = tape.backward_begins[i]
        j = bisect.bisect_right(tape.resets, seq)
        if j < len(tape.resets) and tape.resets[j] < begin:
            return None  # reset cleared the recorded event before any backward
        return begin

    # ------------------------------------------------------------ names and places
    def location(self, site_id: int, role: str = "") -> Location:
        row = self.sites.get(int(site_id))
        if row is None:
            return Location(file="<unknown>", line=0, role=role)
        library_site = row.get("library_site")  # (schema 6) the library line behind it
        inner = self.sites.get(int(library_site)) if library_site is not None else None
        inside: tuple[str, int, str, str] | tuple[()] = ()
        if inner is not None:
            inside = (
                inner["file"] or "<unknown>",
                int(inner["line"] or 0),
                inner["text"] or "",
                inner["function"] or "",
            )
        return Location(
            file=row["file"] or "<unknown>",
            line=int(row["line"] or 0),
            role=role,
            text=row["text"] or "",
            function=row["function"] or "",
            inside=inside,
        )

    def event_location(self, ev: int, role: str = "") -> Location:
        return self.location(int(self.site[ev]), role)

    def kernel_name(self, ev: int) -> str:
        kernel = self.kernels.get(int(self.kernel[ev]))
        return kernel.key if kernel else "?"

    def kernel_line(self, kernel_id: int, line: int, role: str) -> Location | None:
        kernel = self.kernels.get(int(kernel_id))
        if kernel is None or line is None or line < 0:
            return None
        text = kernel.source_model.line_text(int(line), kernel.file)
        if text is None:  # a line of a @wp.func callee: read it from the file when it is still there
            text = linecache.getline(kernel.file, int(line)).strip() if kernel.file else ""
        return Location(file=kernel.file, line=int(line), role=role, text=text, function=kernel.key)

    def array_label(self, array_id: int, arg: str = "") -> str:
        """The user's name for an array: its call-site label, its owner's label + '.grad', else the arg name."""
        info = self.arrays.get(int(array_id))
        if info is None:
            return arg or f"array#{array_id}"
        if info.label:
            return info.label
        if info.grad_of >= 0:
            return self.array_label(info.grad_of) + ".grad"
        if info.base_id >= 0 and info.base_id in self.arrays:
            base = self.array_label(info.base_id)
            if not base.startswith("array#"):
                return base + "[view]"
        return arg or f"array#{array_id}"

    def aliases(self, array_ids: list[int] | set[int]) -> list[str]:
        """Labels of every array object overlapping the given ones (the Python names of one buffer)."""
        infos = [self.arrays[a] for a in array_ids if a in self.arrays]
        allocs = {info.alloc_id for info in infos if info.alloc_id >= 0}
        labels: list[str] = []
        for other in self._arrays_by_alloc_for(allocs):
            if other.grad_of >= 0:
                continue
            if any(overlaps(other, info) for info in infos):
                label = other.label or ""
                if label and label not in labels:
                    labels.append(label)
        return labels

    def memory_of(self, array_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(allocation, first byte, end byte) of each array object's view, by :attr:`ArrayInfo.hull`:
        allocation -1 (and bytes 0) for an unknown array or one without an allocation. Looked up
        once per distinct id."""
        unique, inverse = np.unique(np.asarray(array_ids, dtype=np.int64), return_inverse=True)
        alloc = np.full(len(unique), -1, dtype=np.int64)
        lo = np.zeros(len(unique), dtype=np.int64)
        hi = np.zeros(len(unique), dtype=np.int64)
        for i, array_id in enumerate(unique.tolist()):
            info = self.arrays.get(array_id)
            if info is not None and info.alloc_id >= 0:
                alloc[i] = info.alloc_id
                lo[i], hi[i] = info.hull
        inverse = inverse.reshape(-1)
        return alloc[inverse], lo[inverse], hi[inverse]

    def _arrays_by_alloc_for(self, allocs: set[int]) -> list[ArrayInfo]:
        return [a for alloc in allocs for a in self.arrays_by_alloc.get(alloc, ())]

    @cached_property
    def arrays_by_alloc(self) -> dict[int, list[ArrayInfo]]:
        table: dict[int, list[ArrayInfo]] = {}
        for info in self.arrays.values():
            table.setdefault(info.alloc_id, []).append(info)
        return table

    @cached_property
    def allocs(self) -> dict[int, dict[str, Any]]:
        """Rows of the allocs table by alloc_id."""
        return {row["alloc_id"]: row for row in self.trace.tables["allocs"].to_pylist()}

    def allocation_site(self, array_id: int) -> int:
        """Site id where the memory behind ``array_id`` was allocated (its owner's creation), -1 unknown."""
        info = self.arrays.get(int(array_id))
        if info is None:
            return -1
        seen = set()
        root = info
        while root.base_id >= 0 and root.base_id in self.arrays and root.base_id not in seen:
            seen.add(root.base_id)
            root = self.arrays[root.base_id]
        if root.kind == S.ARRAY_OWNED and root.site >= 0:
            return root.site
        for other in self.arrays_by_alloc.get(root.alloc_id, ()):
            if other.kind == S.ARRAY_OWNED and other.site >= 0:
                return other.site
        alloc = self.allocs.get(root.alloc_id)
        if alloc is not None and alloc.get("site") is not None and alloc["site"] >= 0:
            return int(alloc["site"])
        return root.site

    @cached_property
    def grad_array_ids(self) -> np.ndarray:
        """Sorted array ids of every gradient buffer (and views of one): ``is_grad_array`` for all."""
        return np.array(sorted(a for a in self.arrays if self.is_grad_array(a)), dtype=np.int64)

    def is_grad_array(self, array_id: int) -> bool:
        info = self.arrays.get(int(array_id))
        if info is None:
            return False
        if info.kind == S.ARRAY_GRAD or info.grad_of >= 0:
            return True
        base = info.base_id
        while base >= 0 and base in self.arrays:
            parent = self.arrays[base]
            if parent.grad_of >= 0 or parent.kind == S.ARRAY_GRAD:
                return True
            base = parent.base_id
        return False


def _json_list(text: str | None) -> list[str]:
    if not text:
        return []
    try:
        value = json.loads(text)
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []
