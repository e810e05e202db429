"""Start and stop recording: the module API behind ``warptrace.start/stop`` and the CLI.

:func:`start` creates the session (:class:`~warptrace.record.session.Recorder`) and
installs the wrappers (:mod:`warptrace.record.install`); :func:`stop` restores Warp and
finishes the trace; :func:`flush`, :func:`active` and :data:`last_summary` complete it.
Set ``WARPTRACE_STRICT=1`` (or :data:`warptrace.record.session.STRICT`) to make
recorder bugs raise instead of being logged.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any

from warptrace.errors import UsageError
from warptrace.record import install
from warptrace.record.gate import StepGate
from warptrace.record.numerics import Numerics, current
from warptrace.record.session import Recorder
from warptrace.trace.schedule import parse_last, parse_steps

last_summary: dict[str, Any] | None = None
_active: Recorder | None = None
_start_lock = threading.Lock()


def active() -> Recorder | None:
    """The recorder of the session in progress, if any."""
    return _active


def start(
    path: str | os.PathLike[str] = "warptrace.wtrace",
    *,
    numerics: bool = False,
    record_steps: str | None = None,
    record_last: int | None = None,
    **meta: Any,
) -> None:
    """Start recording into ``path`` and install the patches (a second call is a no-op).

    ``numerics``: also summarize the values each event writes (:mod:`warptrace.record.numerics`).
    ``record_steps`` (``"0-4,100-104"``) / ``record_last`` (``K``): a recording schedule
    (:mod:`warptrace.trace.schedule`); a bad one raises :class:`~warptrace.errors.UsageError`."""
    global _active
    ranges = parse_steps(record_steps) if record_steps is not None else None
    last = parse_last(record_last) if record_last is not None else None
    if ranges is not None and last is not None:
        raise UsageError("--record-steps and --record-last cannot be combined")
    with _start_lock:
        if _active is not None:
            return
        rec = Recorder(path, meta)
        with rec.lock:
            rec.ident.scan_preexisting()
        if ranges is not None or last is not None:
            rec.gate = StepGate(rec, ranges, last)
        if numerics:
            current.numerics = Numerics(rec)
        install.install(rec, numerics=numerics)
        if rec.gate is not None:
            rec.gate.begin()
        _active = rec
        atexit.register(_stop_at_exit)


def stop(exit_status: int | None = None, error: str | None = None) -> str | None:
    """Restore Warp, finish the trace on disk, set :data:`last_summary`; returns the trace path."""
    global _active, last_summary
    with _start_lock:
        rec = _active
        if rec is None:
            return None
        _active = None
        install.uninstall()
        atexit.unregister(_stop_at_exit)
        numerics, current.numerics = current.numerics, None
        if numerics is not None:  # after uninstall: the adjoint checks it runs are not recorded
            try:
                rec.writer.meta["numerics"] = numerics.finish()
            except Exception as exc:
                rec.fail(exc)
        last_summary = rec.close(exit_status, error)
        return str(rec.path)


def flush() -> None:
    """Write the buffered rows now; returns once they are on disk."""
    rec = _active
    if rec is not None:
        rec.flush(force=True, wait=True)


def _stop_at_exit() -> None:
    stop(error="interpreter exited before warptrace.stop()")
