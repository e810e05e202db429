"""The trace-writer process: Parquet encoding outside the recorded program's interpreter.

Why a process: the recorder's writer thread shares the program's interpreter lock.
Every Arrow or Parquet call the thread makes gives the lock back and takes it again,
and each time the program's thread is made to wait and woken (a futex wake and a
context switch). On the 2-core development VM that cost the program ~250 µs of its own
CPU time per training step of ``tools/bench_record.py`` (b), more than writing the same
rows synchronously (~80 µs), against ~45 µs with this process (docs/dev/history.md). The writer
thread now only pickles each batch of the recorder's int lists into a pipe (one C pass
under the lock, ~9 ns per int); this process turns them into int64 matrices, builds the
columns and writes the parts, with its own interpreter lock.

Protocol (length-prefixed pickles on the child's stdin, one JSON line per reply on its
stdout):

- ``("attach", path, trace_id, part_index)``: first message; parts are numbered from
  ``part_index`` on (the recorded process may have written some itself). Reply
  ``{"ready": true}`` once the child has imported what it needs: until then the
  recorded process sends nothing else, so a child that cannot start loses no row.
- ``("batch", (kinds, names, dim_texts), batch, disordered)``: the string tables' new
  entries since the last batch, then a :data:`~warptrace.trace.rows.Batch` to write
  (the recorder's own lists: the int rows become matrices here).
- ``("sync",)``: reply ``{"errors": [...]}`` once everything before it is on disk.
  Batches are otherwise gathered into bigger parts (``COALESCE_*`` below).
- ``("finish",)``: reply ``{"part_index", "rows_written", "bytes_written", "errors"}``
  and exit. The recorded process writes ``meta.json`` itself.

End of input without ``finish`` (the recorded process was killed): the batches received
are written, then the process exits; the trace stays readable up to its last part,
``complete`` false, as after a crash with the in-process writer. The process ignores
SIGINT (a Ctrl-C in the terminal is the program's to handle; the program then finishes
the trace through this process).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import pickle
import re
import select
import signal
import struct
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

import warptrace
from warptrace.trace.rows import (
    ACCESS_WIDTH,
    EVENT_WIDTH,
    PACKED_SPECS,
    WRITE_ORDER,
    Batch,
    PartSink,
    RowParts,
    int_rows,
    plain,
)
from warptrace.trace.writer import TraceWriter

_HEADER = struct.Struct("<Q")
_PIPE_BYTES = 1 << 20  # F_SETPIPE_SZ where Linux allows it: a batch rarely blocks the writer thread
_F_SETPIPE_SZ = 1031
# the interpreters a child can be started with: not an embedding application (Blender,
# Omniverse Kit) whose executable would start the application itself
_PYTHON_NAME = re.compile(r"python[0-9.]*w?(\.exe)?$", re.IGNORECASE)


_MAX_PIECES = 512  # below every platform's IOV_MAX (1024 on Linux)


class _Pieces(list[Any]):
    """The file a message is pickled to: the pieces as the pickler writes them (frames of its
    own output, and large bytes payloads as they are), and their total size."""

    size = 0

    def write(self, data: Any) -> int:
        self.append(data)
        n = memoryview(data).nbytes
        self.size += n
        return n


def _packed(buf: Any, pack: Callable[..., Any], *args: Any) -> Any:
    """One table's rows for the pipe: a compiled row buffer's packed form (``rows.plain``), a
    list packed by ``pack(list, *args)``, or the list as it is where ``pack`` cannot (None)."""
    buf = plain(buf)
    if isinstance(buf, list):
        out = pack(buf, *args)
        if out is not None:
            return out
    return buf


def packed(batch: Batch, pack: Any, pack_rows: Any) -> Batch:
    """``batch`` with its event and access rows as native int64 bytes, and its arrays and
    allocs rows as int64 bytes with a string table (:data:`~warptrace.trace.rows.PACKED_SPECS`),
    for this process. The compiled row buffers hold them so already; rows that reach here as
    lists (split around an open event, or a buffer that a value of another type turned into
    its list) are packed by the compiled ``pack_int64`` (``pack``) and ``pack_rows``. Pickling
    a list costs the writer thread ~9 ns per int under the interpreter lock, the time the
    program's thread waits for it; the packed bytes go into the pipe as they are
    (:class:`_Pieces`). A list with a value that is not an int64 (a recorder bug) is sent as
    it is, for this process to note; rows with a value of another type than their column's,
    as they are."""
    out: list[tuple[str, Any]] = []
    for table, buf in batch:
        if table == "events":
            buf = (_packed(buf[0], pack), buf[1])
        elif table == "accesses":
            buf = _packed(buf, pack)
        elif table in PACKED_SPECS and buf:
            buf = _packed(buf, pack_rows, PACKED_SPECS[table])
        out.append((table, buf))
    return tuple(out)


class SinkError(RuntimeError):
    """The trace-writer process could not be started or ended without being asked."""


def usable() -> bool:
    """Whether a trace-writer process can be started from this interpreter."""
    exe = sys.executable or ""
    return bool(exe) and _PYTHON_NAME.match(os.path.basename(exe)) is not None and os.path.isfile(exe)


class SinkProcess:
    """The recorded process' end: start the child, send it batches, collect its report."""

    def __init__(self, path: str | os.PathLike[str], trace_id: str, part_index: dict[str, int]) -> None:
        # the child finds this warptrace and this pyarrow, whatever put them on sys.path here
        # (found, not imported: the recorded process need not import pyarrow)
        spec = importlib.util.find_spec("pyarrow")
        origins = [warptrace.__file__, spec.origin if spec is not None else None]
        roots = [str(Path(origin).resolve().parents[1]) for origin in origins if origin]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*roots, *filter(None, [env.get("PYTHONPATH")])]))
        env.pop("PYTHONSTARTUP", None)
        kwargs: dict[str, Any] = {}
        if os.name == "posix":
            kwargs["start_new_session"] = True  # no terminal signals: the program ends the child
        else:  # pragma: no cover - Windows
            kwargs["creationflags"] = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
        # the trace folder as its working directory and -P (3.11+): a module in the program's
        # folder (a numpy.py, a json.py) cannot shadow what the child imports
        safe_path = ["-P"] if sys.version_info >= (3, 11) else []
        try:
            self.proc = subprocess.Popen(
                [sys.executable, *safe_path, "-c", "from warptrace.trace.sink import serve; serve()"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
                cwd=str(path),
                close_fds=True,
                **kwargs,
            )
        except OSError as exc:
            raise SinkError(f"the trace-writer process did not start: {exc}") from None
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._out = self.proc.stdin.fileno()
        self._in = self.proc.stdout
        if sys.platform.startswith("linux"):
            try:
                import fcntl

                fcntl.fcntl(self._out, _F_SETPIPE_SZ, _PIPE_BYTES)
            except OSError:
                pass  # above /proc/sys/fs/pipe-max-size: the default pipe works too
        self._sent = [0, 0, 0]  # entries of (kinds, names, dim_texts) the child has
        try:
            self._send(("attach", str(path), trace_id, dict(part_index)))
            self._reply()  # ready: nothing is sent to a child that could not start
        except SinkError:
            self.kill()
            raise

    def write(
        self, batch: Any, disordered: bool, kinds: list[str], names: list[str], dim_texts: list[str]
    ) -> None:
        codes = []
        for i, table in enumerate((kinds, names, dim_texts)):
            new = table[self._sent[i] :]  # the tables only grow (another thread may append now)
            self._sent[i] += len(new)
            codes.append(new)
        self._send(("batch", tuple(codes), batch, disordered))

    def sync(self) -> list[str]:
        """Wait until everything sent is on disk; the errors the child met meanwhile."""
        self._send(("sync",))
        return list(self._reply().get("errors", []))

    def finish(self) -> dict[str, Any]:
        """Everything sent is on disk and the child has ended: its counters and errors."""
        self._send(("finish",))
        report = self._reply()
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait()
        self._in.close()
        return report

    def kill(self) -> None:
        """End the child without waiting for what it has not written."""
        for stream in (self.proc.stdin, self._in):
            with contextlib.suppress(OSError):
                stream.close()  # type: ignore[union-attr]
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def _send(self, message: Any) -> None:
        pieces = _Pieces()
        # a Pickler with a file hands a large bytes payload (the packed rows) to its write()
        # as the object itself: no copy into the pickle, and header and pieces go out in
        # one system call where the platform has writev
        pickle.Pickler(pieces, protocol=pickle.HIGHEST_PROTOCOL).dump(message)
        data: list[Any] = [_HEADER.pack(pieces.size), *pieces]
        try:
            if not hasattr(os, "writev") or len(data) > _MAX_PIECES:
                data = [b"".join(data)]
            while data:
                written = os.writev(self._out, data) if len(data) > 1 else os.write(self._out, data[0])
                while data and written >= len(data[0]):
                    written -= len(data[0])
                    data.pop(0)
                if data and written:
                    data[0] = memoryview(data[0])[written:]
        except OSError as exc:  # BrokenPipeError: the child has ended; EBADF: the program closed the pipe
            raise SinkError(self._ended(exc)) from None

    def _reply(self) -> dict[str, Any]:
        try:
            line = self._in.readline()
        except (OSError, ValueError) as exc:  # ValueError: the program closed our descriptor
            raise SinkError(self._ended(exc)) from None
        if not line:
            raise SinkError(self._ended(None))
        try:
            return dict(json.loads(line))
        except ValueError as exc:  # something else wrote to the child's stdout
            raise SinkError(f"the trace-writer process answered {line[:80]!r}") from exc

    def _ended(self, exc: BaseException | None) -> str:
        try:
            status = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            status = None
        why = f" ({exc.__class__.__name__}: {exc})" if exc is not None else ""
        return f"the trace-writer process ended unexpectedly (exit status {status}){why}"


# The child gathers consecutive batches into one part per table, up to these sizes or
# for at most COALESCE_SECONDS after the first of them arrived (POSIX: a select() on the
# pipe; elsewhere every batch is a part). The recorded process still hands a batch over
# every 4,096 events or 2 s, so what a killed program leaves is unchanged (the child
# writes everything it holds when its input ends); the parts are 8x larger: a long run
# makes 8x fewer files to open when the trace is read.
COALESCE_EVENTS = 32768
COALESCE_ACCESSES = 131072
COALESCE_SECONDS = 2.0
_TIMEOUT = object()


class _Frames:
    """Length-prefixed pickles from a file descriptor, with a timeout (POSIX)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = bytearray()
        self.eof = False

    def next(self, timeout: float | None) -> Any:
        """The next message; None at the end of input (a message cut short is dropped);
        ``_TIMEOUT`` when ``timeout`` seconds passed without a whole message."""
        buf = self.buf
        while True:
            if len(buf) >= _HEADER.size:
                (size,) = _HEADER.unpack_from(buf)
                end = _HEADER.size + size
                if len(buf) >= end:
                    message = pickle.loads(buf[_HEADER.size : end])  # (a copy: buf is resized next)
                    del buf[:end]
                    return message
            if self.eof:
                return None
            if timeout is not None:
                ready, _, _ = select.select([self.fd], [], [], max(timeout, 0.0))
                if not ready:
                    return _TIMEOUT
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                self.eof = True
            buf += chunk


class _Pending:
    """Batches received and not written yet, merged table by table. The two big tables
    are kept as flat int64 arrays (compact, and nothing for the cyclic GC to walk)."""

    def __init__(self, note: Callable[[BaseException], None]) -> None:
        self.note = note
        self.tables: dict[str, list[Any]] = {}
        self.extra: list[Any] = []
        self.events = self.accesses = 0
        self.disordered = False
        self.since: float | None = None

    def add(self, batch: Any, disordered: bool, now: float) -> None:
        for table, buf in batch:
            if table == "events":
                rows, extra = buf
                if rows:  # (a list of ints, or their int64 bytes: see packed)
                    matrix = int_rows(rows, EVENT_WIDTH, self.note)
                    self.tables.setdefault(table, []).append(matrix.reshape(-1))
                    self.events += len(matrix)
                self.extra.extend(extra)
            elif table == "accesses":
                if buf:
                    matrix = int_rows(buf, ACCESS_WIDTH, self.note)
                    self.tables.setdefault(table, []).append(matrix.reshape(-1))
                    self.accesses += len(matrix)
            elif table in PACKED_SPECS:  # row lists and pack_rows' tuples: parts, in order
                self.tables.setdefault(table, RowParts()).append(buf)
            else:
                self.tables.setdefault(table, []).extend(buf)
        self.disordered = self.disordered or disordered  # seqs are unique: one sort orders all
        if self.since is None:
            self.since = now

    def full(self) -> bool:
        return self.events >= COALESCE_EVENTS or self.accesses >= COALESCE_ACCESSES

    def take(self) -> tuple[Any, bool]:
        names = [t for t in WRITE_ORDER if t in self.tables] + [
            t for t in self.tables if t not in WRITE_ORDER
        ]
        merged = {
            t: np.concatenate(self.tables[t]) if t in ("events", "accesses") else self.tables[t]
            for t in names
        }
        batch = tuple((t, (merged[t], self.extra) if t == "events" else merged[t]) for t in names)
        disordered = self.disordered
        self.tables, self.extra = {}, []
        self.events = self.accesses = 0
        self.disordered = False
        self.since = None
        return batch, disordered


def serve(stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
    """The child's main loop (see the module docstring)."""
    if hasattr(signal, "SIGINT"):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    frames = _Frames((stdin or sys.stdin.buffer).fileno())
    out = stdout or sys.stdout.buffer
    first = frames.next(None)
    if not first or first[0] != "attach":
        return
    _, path, trace_id, part_index = first
    writer = TraceWriter.attach(path, trace_id, part_index)
    errors: list[str] = []

    def note(exc: BaseException) -> None:
        errors.append("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))

    sink = PartSink(writer, [], [], [], note)
    pending = _Pending(note)
    timed = os.name == "posix"

    def write_pending() -> None:
        if pending.since is None:
            return
        batch, disordered = pending.take()
        try:
            sink.write(batch, disordered)
        except Exception as exc:  # disk full, unwritable path: report, keep going
            note(exc)

    def reply(**values: Any) -> None:
        out.write(json.dumps(values).encode() + b"\n")
        out.flush()

    reply(ready=True)

    while True:
        timeout = None
        if pending.since is not None and timed:
            timeout = pending.since + COALESCE_SECONDS - time.monotonic()
        message = frames.next(timeout)
        if message is _TIMEOUT:
            write_pending()
            continue
        if message is None:  # the recorded process ended without finishing (killed)
            write_pending()
            return
        what = message[0]
        if what == "batch":
            kinds, names, dim_texts = message[1]
            sink.kinds.extend(kinds)
            sink.names.extend(names)
            sink.dim_texts.extend(dim_texts)
            pending.add(message[2], message[3], time.monotonic())
            if pending.full() or not timed:
                write_pending()
        elif what == "sync":
            write_pending()
            reply(errors=errors)
            errors = []
        elif what == "finish":
            write_pending()
            reply(
                part_index=writer.part_index,
                rows_written=writer.rows_written,
                bytes_written=writer.bytes_written,
                counts=dict(sink.counts),
                errors=errors,
            )
            return
