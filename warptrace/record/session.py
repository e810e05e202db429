"""The recording session: flat columnar buffers, sequence numbers, thread ids, batched flush.

Events are appended as rows to *interleaved* flat lists (one ``list.extend`` of a tuple
per row, one list per table) and sliced into columns only when a part is flushed:
no Python object per event survives the append, so the cyclic GC has nothing to walk,
and one C call per row keeps the per-launch cost near a microsecond. A single
re-entrant lock guards the buffers and the counters; per-thread state (re-entrancy
guard, backward phase, thread index) lives in a ``threading.local``.

The two big tables hold *only ints* in memory, so that a whole buffer becomes an int64
matrix in one ``np.fromiter`` pass whose columns are sliced without touching a Python
object per value (:mod:`warptrace.trace.rows`; in the trace-writer process once it runs,
:mod:`warptrace.trace.sink`, which the writer thread hands each batch to as a pickle of
these lists): an event row is
:data:`EVENT_ROW` (``kind`` and ``dim`` as codes into :attr:`Recorder.kinds` /
:attr:`Recorder.dim_texts`; the rare ``value``/``detail`` go to ``ev_extra`` as
``(seq, value, detail)``), an access row is :data:`~warptrace.trace.rows.ACCESS_ROW` (``arg``/``field`` as
codes into :attr:`Recorder.names`). The code tables only grow, so a code appended
before its row is always resolvable when the row is written.

Parts are flushed every ``FLUSH_EVENTS`` events or ``FLUSH_SECONDS`` seconds (checked
on append; the writer thread also flushes when the program is idle), dimension tables
(sites, kernels, arrays, ...) before the events that reference them, so a run killed
with SIGKILL leaves a trace that is consistent up to its last flush.

The module API that starts and stops a session (``start``/``stop``/``flush``) is
:mod:`warptrace.record.recorder`; this module is the session object it creates.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import threading
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import warp

from warptrace.record.callsite import Sites
from warptrace.record.identity import Identity
from warptrace.trace import sink as sink_process
from warptrace.trace.rows import (
    ACCESS_WIDTH,
    EVENT_ROW,
    EVENT_WIDTH,
    WRITE_ORDER,
    Batch,
    Extra,
    PartSink,
    event_counts_of_parts,
)
from warptrace.trace.schema import (
    BACKWARD_BEGIN,
    COPY,
    EVENT_KIND_CODES,
    EVENT_KINDS,
    LAUNCH,
    MEMSET,
    TAPE_CREATE,
)
from warptrace.trace.writer import TraceWriter

__all__ = ["ACCESS_WIDTH", "EVENT_ROW", "EVENT_WIDTH", "Recorder", "ThreadState"]

FLUSH_EVENTS = 4096
FLUSH_ACCESSES = 16384
FLUSH_SECONDS = 2.0
MAX_ERRORS = 20


def _writer_mode() -> str:
    """``WARPTRACE_WRITER``: ``process`` (the default: a trace-writer process once the run has
    something to flush before it ends; :mod:`warptrace.trace.sink`), ``thread`` (Parquet
    encoding on an in-process thread) or ``sync`` (on the recording thread, at each flush).
    ``WARPTRACE_SYNC_WRITES=1`` is ``sync``, as before."""
    mode = os.environ.get("WARPTRACE_WRITER", "").strip().lower()
    if os.environ.get("WARPTRACE_SYNC_WRITES", "") not in ("", "0"):
        return "sync"
    return mode if mode in ("process", "thread", "sync") else "process"


_perf_ns = time.perf_counter_ns

# Set WARPTRACE_STRICT=1 to make recorder bugs raise instead of being logged (tests).
STRICT = os.environ.get("WARPTRACE_STRICT", "") not in ("", "0")


class ThreadState:
    """Per-thread recording state (one per thread and session, reached via ``Recorder.local``).

    A slotted object behind one ``threading.local`` attribute: each hot-path read is a
    slot access instead of a ``threading.local`` lookup.
    """

    __slots__ = (
        "bw_frame", "bw_site", "bw_tape", "copy_ctx", "grad_owner", "guard", "parent", "phase", "scope_site",
        "scope_tape", "thread", "zeroed",
    )  # fmt: skip

    def __init__(self, thread: int) -> None:
        self.guard = 0  # > 0 while warptrace or a wrapped Warp call runs: nested calls are not events
        self.phase = 0  # 1 inside Tape.backward
        self.bw_tape = -1  # tape id of the backward in progress
        self.bw_site = -1  # call site of that Tape.backward()
        self.bw_frame: Any = None  # the frame that wrapper called Warp's backward from
        self.parent = -1  # seq of the enclosing event (tape.zero for its memsets)
        self.scope_tape = -1  # tape id inside Tape.zero()/reset(): their memsets belong to it
        self.scope_site = -1  # call site of that zero()/reset()
        self.thread = thread  # small per-run thread index
        # [guard, seq, dest, src, recorded, site] of the copy in progress
        self.copy_ctx: list[Any] | None = None
        self.grad_owner: Any = None  # array whose .grad is being allocated
        # inside Tape.zero()/reset(): the gradients its own frame zeroed, recorded as one
        # batch of MEMSET rows when it returns (one per gradient, in call order)
        self.zeroed: list[Any] | None = None


class Recorder:
    """One trace being recorded. Everything mutable is guarded by ``lock``.

    The wrappers read ``lock``, ``local``, ``sites``, ``tok``, ``ident`` and ``captures``
    as they please: they are never rebound. ``ev``, ``acc`` and the other row buffers are
    rebound at each flush, so a wrapper reads them under the lock.
    """

    def __init__(self, path: str | os.PathLike[str], meta: dict[str, Any]) -> None:
        self.path = Path(path)  # as given (what stop() returns and the summary shows)
        # where the parts go: fixed at start, so that a program that changes its working
        # directory does not scatter its trace (the trace-writer process starts later)
        self.dir = self.path.absolute()
        self.tok = object()  # session token stored with every per-object id
        self.lock = threading.RLock()
        self.local = threading.local()  # .state: this thread's ThreadState
        self.seq = 0  # next event sequence number
        self.open_seqs: set[int] = set()  # reserved seqs whose rows are not appended yet
        self.held_below = -1  # the open seq a flush last found nothing below (see flush)
        self.disordered = False  # a reserved seq was appended after later ones

        self.flush_ev_len = FLUSH_EVENTS * EVENT_WIDTH
        self.flush_acc_len = FLUSH_ACCESSES * ACCESS_WIDTH
        self.ev: list[int] = []  # EVENT_ROW rows
        self.ev_extra: Extra = []  # (seq, value, detail)
        self.acc: list[int] = []  # ACCESS_ROW rows
        # code tables of the int rows (append-only: the writer thread reads them)
        self.kinds: list[str] = list(EVENT_KINDS)
        self.kind_codes: dict[str, int] = dict(EVENT_KIND_CODES)
        self.names: list[str] = [""]  # access arg / field names; code 0 is ""
        self.name_codes: dict[str, int] = {"": 0}
        self.dim_texts: list[str] = []
        self.dim_codes: dict[str, int] = {}
        self.array_rows: list[Any] = []
        self.alloc_rows: list[Any] = []
        self.kernel_rows: list[Any] = []
        self.karg_rows: list[Any] = []
        self.site_rows: list[Any] = []

        self.next_thread = 0
        self.next_tape = 0
        self.next_graph = 0
        self.next_kernel = 0
        self.kernel_ids: dict[int, tuple[int, Any]] = {}  # id(facts) -> (kernel_id, facts)
        self.captures: dict[str, int] = {}  # device alias -> graph id while capturing
        self.executing_captures: set[int] = set()  # graph ids whose launches also run at capture

        self.errors: list[str] = []
        self.error_count = 0
        # the recording schedule (warptrace.record.gate.StepGate), None: every step is recorded
        self.gate: Any = None

        self.flush_deadline = time.perf_counter_ns() + int(FLUSH_SECONDS * 1e9)

        self.sites = Sites(self.site_rows.extend, self.lock)
        self.ident = Identity(self)
        full_meta = {
            "warp_version": warp.config.version,
            "numpy_version": np.__version__,
            "pid": os.getpid(),
        }
        full_meta.update(meta)
        self.writer = TraceWriter(self.dir, full_meta)
        self.closed = False
        self.pid = os.getpid()  # a forked child of the program writes nothing (see flush)
        # where the parts are encoded: in this process (the writer thread, or the recording
        # thread in "sync" mode) until the run flushes before its end, then, in "process"
        # mode, in the trace-writer process (warptrace.trace.sink)
        self.writer_mode = _writer_mode()
        self.parts = PartSink(self.writer, self.kinds, self.names, self.dim_texts, self._note)
        self.sink: sink_process.SinkProcess | None = None
        self.sink_failed = self.writer_mode != "process" or not sink_process.usable()
        # meta.json "writer": where the parts were encoded ("process" once the child ran)
        self.writer_used = "sync" if self.writer_mode == "sync" else "thread"
        # the summary's counts: the trace-writer process's report, plus PartSink's here
        self.sink_counts: Counter[str] = Counter()
        self.counts_lost = False
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._writer_loop, name="warptrace-writer", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ ids
    def thread_state(self) -> ThreadState:
        """This thread's state; the first call from a thread gives it the next thread index."""
        try:
            return self.local.state
        except AttributeError:
            with self.lock:
                state = ThreadState(self.next_thread)
                self.next_thread += 1
            self.local.state = state
            return state

    def _code(self, table: list[str], codes: dict[str, int], text: str) -> int:
        code = codes.get(text)
        if code is None:
            with self.lock:
                code = codes.get(text)
                if code is None:
                    code = len(table)
                    table.append(text)  # before the code is handed out: see the module docstring
                    codes[text] = code
        return code

    def name_code(self, name: str) -> int:
        """Code of an access ``arg``/``field`` name."""
        code = self.name_codes.get(name)
        return code if code is not None else self._code(self.names, self.name_codes, str(name))

    def dim_code(self, dim: str | None) -> int:
        """Code of a launch ``dim`` text (-1: null)."""
        if dim is None:
            return -1
        code = self.dim_codes.get(dim)
        return code if code is not None else self._code(self.dim_texts, self.dim_codes, dim)

    def kind_code(self, kind: str) -> int:
        code = self.kind_codes.get(kind)
        return code if code is not None else self._code(self.kinds, self.kind_codes, kind)

    def new_id(self, counter: str) -> int:
        with self.lock:
            value = getattr(self, counter)
            setattr(self, counter, value + 1)
            return value

    def intern_kernel(self, facts: Any) -> int:
        """kernel_id of ``facts``; writes its ``kernels``/``kernel_args`` rows the first time."""
        hit = self.kernel_ids.get(id(facts))
        if hit is not None and hit[1] is facts:
            return hit[0]
        with self.lock:
            kernel_id = self.next_kernel
            self.next_kernel = kernel_id + 1
            self.kernel_ids[id(facts)] = (kernel_id, facts)
            self.kernel_rows.extend(
                (
                    kernel_id,
                    str(facts.key),
                    str(facts.module or ""),
                    str(facts.file or ""),
                    int(facts.line if facts.line is not None else -1),
                    facts.source,
                    bool(facts.enable_backward),
                    json.dumps(list(facts.custom_grad or ())),
                    json.dumps(list(facts.custom_replay or ())),
                    bool(facts.native_snippets),
                    str(facts.analysis),
                    str(getattr(facts, "source_model", "") or ""),
                )
            )
            for arg in facts.args:
                self.karg_rows.extend(
                    (
                        kernel_id,
                        int(arg.index),
                        str(arg.name),
                        str(arg.type),
                        str(arg.field or ""),
                        bool(arg.is_array),
                        bool(arg.read),
                        bool(arg.write),
                        bool(arg.store),
                        bool(arg.accumulate),
                        int(arg.write_line if arg.write_line is not None else -1),
                        int(arg.read_line if arg.read_line is not None else -1),
                    )
                )
        return kernel_id

    # ------------------------------------------------------------------ events
    def emit(
        self,
        kind: str,
        *,
        tape: int = -1,
        recorded: bool = False,
        phase: int | None = None,
        adjoint: bool = False,
        executed: bool = True,
        site: int = -1,
        kernel: int = -1,
        parent: int | None = None,
        array_id: int = -1,
        ref_id: int = -1,
        value: float | None = None,
        dim: str | None = None,
        detail: str | None = None,
        accesses: tuple[tuple[Any, ...], ...] = (),
        seq: int | None = None,
    ) -> int:
        """Append one event row (and its access rows ``(array_id, alloc_id, role, flags, arg, field)``,
        ``arg``/``field`` as :meth:`name_code` codes).

        ``seq`` is given for events whose number was reserved with :meth:`reserve`
        (so that children could name them as parent before they finished).
        """
        try:
            tls = self.local.state
        except AttributeError:
            tls = self.thread_state()
        if phase is None:
            phase = tls.phase
        if parent is None:
            parent = tls.parent
        code = self.kind_codes.get(kind)
        if code is None:
            code = self.kind_code(kind)
        dim_code = -1 if dim is None else self.dim_code(dim)
        return self.row(tls.thread, code, tape, recorded, phase, adjoint, executed, site, parent, array_id,
                        ref_id, value, detail, accesses, -1 if seq is None else seq, kernel, dim_code)  # fmt: skip

    def row(
        self,
        thread: int,
        kind: int,
        tape: int,
        recorded: bool,
        phase: int,
        adjoint: bool,
        executed: bool,
        site: int,
        parent: int,
        array_id: int,
        ref_id: int,
        value: float | None,
        detail: str | tuple[bytes, int] | None,
        accesses: tuple[tuple[int, ...], ...],
        seq: int,
        kernel: int = -1,
        dim_code: int = -1,
    ) -> int:
        """:meth:`emit` for the hot wrappers: every column given, positionally.

        ``kind`` is an :data:`~warptrace.trace.schema.EVENT_KIND_CODES` code, ``seq`` -1 for a
        new number, ``dim_code`` a :meth:`dim_code`.
        """
        t_ns = _perf_ns()
        lock = self.lock
        lock.acquire()
        try:
            if seq < 0:
                seq = self.seq
                self.seq = seq + 1
            else:
                self.open_seqs.discard(seq)
                if seq != self.seq - 1:
                    self.disordered = True
            ev = self.ev
            ev.extend(
                (seq, kind, tape, recorded, phase, adjoint, executed, site, kernel, thread, t_ns, parent, array_id,
                 ref_id, dim_code)
            )  # fmt: skip
            if value is not None or detail is not None:
                self.ev_extra.append((seq, value, detail))
            acc = self.acc
            for access in accesses:
                acc.append(seq)
                acc.extend(access)
            if len(ev) >= self.flush_ev_len or len(acc) >= self.flush_acc_len or t_ns >= self.flush_deadline:
                self.flush()
        finally:
            lock.release()
        return seq

    def reserve(self) -> int:
        """Take a seq now and append the row later (see :meth:`emit`)."""
        with self.lock:
            seq = self.seq
            self.seq = seq + 1
            self.open_seqs.add(seq)
        return seq

    def release(self, seq: int) -> None:
        """A reserved event that will never be appended (its Warp call raised, or recording it failed)."""
        with self.lock:
            self.open_seqs.discard(seq)

    def fail(self, exc: BaseException) -> None:
        """A bug in warptrace: never break the user's program, remember it for the summary."""
        self._note(exc)
        if STRICT:
            raise exc

    def _note(self, exc: BaseException) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))

    # ------------------------------------------------------------------ flush
    def flush(self, force: bool = False, wait: bool = False) -> None:
        """Hand the buffered rows to the writer thread as one part per table.

        Called with or without the lock held. The swap is O(1); slicing into columns,
        Arrow conversion and Parquet encoding happen on the writer thread (Parquet
        encoding releases the GIL), so a flush costs the recording thread almost
        nothing. ``wait`` blocks until the part files are on disk.
        """
        with self.lock:
            if self.closed or os.getpid() != self.pid:
                return  # (a forked child: the parent's writer is not this process')
            if self.gate is not None and self.gate.holding:  # --record-last: event rows stay in memory
                self.gate.take_buffers()
            ev, extra, acc = self.ev, self.ev_extra, self.acc
            if self.open_seqs:
                # a parent event is still open (a copy between its reserved seq and its row):
                # keep parent and children in one part, and let a part out only below the
                # earliest open seq, so that parts stay in seq order
                first = min(self.open_seqs)
                if not force and (len(ev) < 4 * self.flush_ev_len or first == self.held_below):
                    return  # (held_below: nothing below that seq is left to let out)
                ev, extra, acc = self._split_below(first)
                if not ev and not force:
                    self.held_below = first
                    return
            self.flush_deadline = time.perf_counter_ns() + int(FLUSH_SECONDS * 1e9)
            batch = tuple(
                zip(
                    WRITE_ORDER,
                    (self.site_rows, self.kernel_rows, self.karg_rows, self.alloc_rows, self.array_rows, acc,
                     (ev, extra)),
                )
            )  # fmt: skip
            disordered = self.disordered
            self.site_rows = []
            self.kernel_rows = []
            self.karg_rows = []
            self.alloc_rows = []
            self.array_rows = []
            if ev is self.ev:  # all of it (after a split, the rest stays, disordered or not)
                self.acc = []
                self.ev = []
                self.ev_extra = []
                self.disordered = False
            self.sites.rebind(self.site_rows.extend)
            if self.writer_mode == "sync":
                self._write_batch(batch, disordered, False)
                return
            done = threading.Event() if wait else None
            # a flush the run's size or time asked for (not the final one, nor an explicit
            # warptrace.flush()) moves the encoding to the trace-writer process
            self._queue.put((batch, disordered, done, not force))
        if done is not None:
            done.wait()

    def submit(self, batch: Batch) -> None:
        """Queue rows of other tables (``numerics``) after the parts flushed before them."""
        with self.lock:
            if self.closed or os.getpid() != self.pid:
                return
            if self.gate is not None and self.gate.mode == "last":  # --record-last: held with their step
                batch = self.gate.submitted(batch)
                if not batch:
                    return
            if self.writer_mode == "sync":
                self._write_batch(batch, False, False)
            else:
                self._queue.put((batch, False, None, False))

    def _split_below(self, first: int) -> tuple[list[int], Extra, list[int]]:
        """Take the buffered event, extra and access rows whose seq is below ``first`` out
        of the buffers (in their order) and return them; the rest stays buffered."""
        taken: list[list[Any]] = []
        for name, width in (("ev", EVENT_WIDTH), ("acc", ACCESS_WIDTH)):
            buf = list(getattr(self, name))
            out: list[int] = []
            kept: list[int] = []
            for i in range(0, len(buf), width):
                (out if buf[i] < first else kept).extend(buf[i : i + width])
            setattr(self, name, kept)
            taken.append(out)
        extra = [row for row in self.ev_extra if row[0] < first]
        self.ev_extra = [row for row in self.ev_extra if row[0] >= first]
        return taken[0], extra, taken[1]

    def _write_batch(self, batch: Batch, disordered: bool, spawn: bool) -> None:
        """Write one flushed batch: encoded here, or handed to the trace-writer process once it
        runs (``spawn``: start it now if it may; :func:`~warptrace.trace.sink.packed`)."""
        if self.sink is None and spawn and not self.sink_failed:
            try:
                self.sink = sink_process.SinkProcess(
                    self.dir, self.writer.meta["trace_id"], self.writer.part_index
                )
                self.writer_used = "process"
            except Exception as exc:  # no usable interpreter: keep encoding here
                self.sink_failed = True
                self.writer.meta["writer_fallback"] = str(exc)
        if self.sink is not None:
            batch = sink_process.packed(batch)
            try:
                self.sink.write(batch, disordered, self.kinds, self.names, self.dim_texts)
                return
            except sink_process.SinkError as exc:
                self._sink_lost(exc)
        self.parts.write(batch, disordered)

    def _sink_lost(self, exc: BaseException) -> None:
        """The trace-writer process ended on its own: what it had not written is lost (noted as
        a recorder error); the parts on disk are recounted and encoding continues here."""
        self._note(exc)
        sink, self.sink, self.sink_failed = self.sink, None, True
        self.counts_lost = True
        if sink is not None:
            sink.kill()
        self.writer.rescan()

    def _sink_sync(self, finish: bool) -> None:
        """Wait for the trace-writer process (and end it when ``finish``); take its errors and,
        at the end, its counters."""
        sink = self.sink
        if sink is None:
            return
        try:
            if finish:
                self.sink = None
                report = sink.finish()
                self.writer.absorb(report["part_index"], report["rows_written"], report["bytes_written"])
                if "counts" in report:
                    self.sink_counts.update(report["counts"])
                else:
                    self.counts_lost = True
                errors = report.get("errors", [])
            else:
                errors = sink.sync()
        except sink_process.SinkError as exc:
            self.sink = sink
            self._sink_lost(exc)
            return
        for text in errors:
            self._note(sink_process.SinkError(text))

    def _writer_loop(self) -> None:
        """The writer thread: write queued batches; flush on its own every FLUSH_SECONDS when idle."""
        if self.sink_failed:  # this process encodes the parts: pyarrow now, not at the first flush
            with contextlib.suppress(Exception):
                import pyarrow.compute  # noqa: F401  # (Array.take imports it)
        with contextlib.suppress(Exception):
            # a write to the pipe of a trace-writer process that died fails with EPIPE here
            # even in a program that restored SIGPIPE's default action (which would kill it)
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPIPE})
        while True:
            try:
                item = self._queue.get(timeout=FLUSH_SECONDS)
            except queue.Empty:
                try:
                    # not forced: an event still open (a copy between its reserved seq and its
                    # row) keeps its part together; the next idle tick flushes it
                    self.flush()
                except Exception as exc:  # pragma: no cover - disk trouble
                    self._note(exc)
                continue
            if item is None:
                try:
                    self._sink_sync(finish=True)
                except Exception as exc:  # pragma: no cover - a bug: the trace must still close
                    self._note(exc)
                return
            batch, disordered, done, spawn = item
            try:
                self._write_batch(batch, disordered, spawn)
                if done is not None:
                    self._sink_sync(finish=False)
            except Exception as exc:  # disk full, unwritable path: keep the program running
                self._note(exc)
            finally:
                if done is not None:
                    done.set()

    def summary(self) -> dict[str, Any]:
        """Counts for the CLI: what the trace-writer process and the PartSink here counted
        as they wrote the event parts (without importing pyarrow in the recorded process),
        else (a forked child of the program, a trace-writer process that ended without its
        report) read back from the event parts on disk."""
        if os.getpid() == self.pid and not self.counts_lost:
            return self._summary(self.parts.counts + self.sink_counts)
        counts: Counter[str] = Counter()
        try:
            counts = event_counts_of_parts(self.dir / "events")
        except Exception as exc:
            self._note(exc)
        return self._summary(counts)

    def _summary(self, counts: Counter[str]) -> dict[str, Any]:
        return {
            "trace": str(self.path),
            "tapes": counts.get(TAPE_CREATE, 0),
            "launches": counts.get(LAUNCH, 0),
            "recorded_launches": counts.get("recorded_launches", 0),
            "untaped_launches": counts.get("untaped_launches", 0),
            "adjoint_launches": counts.get("adjoint_launches", 0),
            "copies": counts.get(COPY, 0),
            "memsets": counts.get(MEMSET, 0),
            "backward_calls": counts.get(BACKWARD_BEGIN, 0),
            "arrays": self.writer.rows_written.get("arrays", 0),
            "events": self.writer.rows_written.get("events", 0),
            "recorder_errors": self.error_count,
        }

    def close(self, exit_status: int | None, error: str | None) -> dict[str, Any]:
        if os.getpid() != self.pid:  # a forked child of the program: the trace is the parent's
            with self.lock:
                self.closed = True
            return self.summary()
        with self.lock:  # nothing can be appended between the last flush and closing
            self.open_seqs.clear()  # an event still open now is never appended: write the rest
            if self.gate is not None:
                self.gate.finish()  # (never raises: a bug is noted, the trace still closes)
            self.flush(force=True)
            self.closed = True
            self._queue.put(None)
        self._thread.join()
        with self.lock:
            summary = self.summary()
            meta: dict[str, Any] = {"summary": summary, "writer": self.writer_used}
            if self.errors:
                meta["recorder_errors"] = self.errors
            runtime = getattr(warp._src.context, "runtime", None)
            if runtime is not None:
                with contextlib.suppress(Exception):  # runtime is up: get_devices() does not init
                    meta["devices"] = [str(d.alias) for d in warp.get_devices()]
            self.writer.close(exit_status=exit_status, error=error, **meta)
        return summary
