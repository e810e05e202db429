"""The optional C module ``warptrace.record._fastlaunch`` (``_fastlaunch.c``), when usable.

It holds the compiled wrappers of ``wp.launch`` (``FastLaunch``), ``wp.copy``
(``FastCopy``), ``array.zero_`` (``FastZero``), ``array.fill_`` (``FastFill``),
``array.numpy()``/``list()`` (``FastRead``), ``array._init_new`` (``FastInitNew``),
``array._init_from_ptr`` (``FastInitFromPtr``), ``array._alloc_grad`` (``FastAllocGrad``), the
``__array_interface__`` getters (``FastInterface``),
``Tape.__init__`` (``FastTapeInit``), ``Tape.__enter__``/``__exit__`` (``FastTapeEvent``),
``Tape.record_func`` (``FastRecordFunc``) and ``Tape.backward`` (``FastBackward``), the
compiled ``Identity.register`` (``FastRegister``) and ``Recorder.row`` (``FastRow``), the row
loop of ``Tape.zero()`` (``zeroed_rows``), the allocation index (``Intervals``, ``AllocIndex``'s twin), the session's seq, flush limits
and row buffers (``Counters``, :mod:`warptrace.record.counters`),
the call-site frame walk (``caller_walk``) and the int64 packing of the rows the writer thread
sends to the trace-writer process (``pack_int64``, ``pack_rows``), and the session's row
buffers that pack their values as they are appended (``Rows``) and its lock (``Lock``). Every one of them has a pure-Python twin, used when the module is
not built (no compiler, another Python version), is a build of another ABI, or
``WARPTRACE_PURE_PYTHON=1`` is set; the choice is made when a session starts.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import weakref
from collections.abc import Callable
from typing import Any

from warptrace.trace.rows import ACCESS_WIDTH, EVENT_WIDTH, PACKED_SPECS

# The Python versions the compiled module is built and tested for (setup.py builds it for
# these only).
COMPILED_FOR = ((3, 11),)
PURE_PYTHON_ENV = "WARPTRACE_PURE_PYTHON"
# The C module's ABI_VERSION this package calls (its arguments, what it reads): an in-tree
# build left from an older _fastlaunch.c (git ignores it, a checkout keeps it) is not used.
COMPILED_ABI = 19
# The compiled wrappers made (uninstall() tells them to let their session go).
COMPILED_WRAPPERS: weakref.WeakSet[Any] = weakref.WeakSet()


def compiled_module() -> Any:
    """The C module, or None: not built, another Python version, a build of another ABI,
    or ``WARPTRACE_PURE_PYTHON`` set."""
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None
    if sys.implementation.name != "cpython" or sys.version_info[:2] not in COMPILED_FOR:
        return None
    try:  # by name: the module is the optional C extension (no .py of the record package)
        module = importlib.import_module("warptrace.record._fastlaunch")
    except ImportError:
        return None
    if getattr(module, "ABI_VERSION", None) != COMPILED_ABI:
        return None
    return module


def compiled_piece(name: str) -> Any:
    """The C module's ``name`` (a type or a function), or None where the module is not used."""
    module = compiled_module()
    return getattr(module, name, None) if module is not None else None


# The session's row buffers (its attribute -> the pack_rows spec of its table's rows).
ROW_BUFFERS = {
    "ev": "i" * EVENT_WIDTH, "acc": "i" * ACCESS_WIDTH,
    "array_rows": PACKED_SPECS["arrays"], "alloc_rows": PACKED_SPECS["allocs"],
}  # fmt: skip


def row_buffer_maker() -> Callable[..., Any]:
    """A maker of the session's row buffers by attribute name (:data:`ROW_BUFFERS`) and the
    number of values expected (room made for them at once): the compiled ``Rows``, which packs
    each value as it is appended, else a list."""
    rows = compiled_piece("Rows")
    if rows is None:
        return lambda name, size=0: []
    # (room for at most 2**20 values at once: a session that raised its flush limits, as the
    # tests do to keep rows in memory, grows its buffers as they fill)
    return lambda name, size=0: rows(ROW_BUFFERS[name], min(size, 1 << 20))


def session_lock() -> Any:
    """The session's reentrant lock: the compiled ``Lock``, which the compiled wrappers take
    without a method call, else a ``threading.RLock`` (the same interface)."""
    lock = compiled_piece("Lock")
    return lock() if lock is not None else threading.RLock()


__all__ = [
    "COMPILED_ABI", "COMPILED_FOR", "COMPILED_WRAPPERS", "PURE_PYTHON_ENV", "ROW_BUFFERS", "compiled_module",
    "compiled_piece", "row_buffer_maker", "session_lock",
]  # fmt: skip
