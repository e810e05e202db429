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

from warptrace.record import install
from warptrace.record.numerics import Numerics, current
from warptrace.record.session import Recorder

last_summary: dict[str, Any] | None = None
_active: Recorder | None = None
_start_lock = threading.Lock()


def active() -> Recorder | None:
    """The recorder of the session in progress, if any."""
    return _active


def start(path: str | os.PathLike[str] = "warptrace.wtrace", *, numerics: bool = False, **meta: Any) -> None:
    """Start recording into ``path`` and install the patches (a second call is a no-op).

    ``numerics``: also summarize the values each event writes (:mod:`warptrace.record.numerics`)."""
    global _active
    with _start_lock:
        if _active is not None:
            return
        rec = Recorder(path, meta)
        with rec.lock:
            rec.ident.scan_preexisting()
        if numerics:
            current.numerics = Numerics(rec)
        install.install(rec, numerics=numerics)
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
