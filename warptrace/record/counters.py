"""The session's event counter, flush limits and row buffers as fields of the compiled ``Counters``.

Every event takes a number (``Recorder.seq``), appends to the row buffers (``ev``, ``acc``,
``ev_extra``: rebound at each flush) and tests the flush limits (``flush_ev_len``,
``flush_acc_len``, ``flush_deadline``). As plain attributes of the Recorder they cost the
compiled wrappers a dictionary lookup each, an int object and a dictionary store per event
(~2,800 instructions of the ~13,800 a taped launch added). Where the C module is used,
:func:`new_recorder` makes a :class:`CountedRecorder`: the seven are C fields of its
``counters`` (``_fastlaunch.Counters``), which the compiled wrappers read and advance in
place, and the Recorder's attributes of those names forward to them, so that the Python
code (``rec.seq``, ``rec.ev``, ``rec.flush_deadline = ...``) is unchanged. Without the C
module the Recorder keeps plain attributes.
"""

from __future__ import annotations

import os
from operator import attrgetter
from typing import Any

from warptrace.record.compiled import compiled_piece
from warptrace.record.session import Recorder


def _forwarded(name: str) -> property:
    """The Recorder attribute ``name``, read from and written to its ``counters``."""

    def set_value(self: Any, value: int) -> None:
        setattr(self.counters, name, value)

    return property(attrgetter(f"counters.{name}"), set_value, doc=f"counters.{name}")


class CountedRecorder(Recorder):
    """A :class:`~warptrace.record.session.Recorder` whose ``seq``, ``flush_*`` limits and row
    buffers are the fields of the compiled ``Counters`` in ``counters`` (set before the Recorder's own
    ``__init__`` assigns them; never rebound: the compiled wrappers hold it per session)."""

    seq = _forwarded("seq")
    flush_ev_len = _forwarded("flush_ev_len")
    flush_acc_len = _forwarded("flush_acc_len")
    flush_deadline = _forwarded("flush_deadline")
    ev = _forwarded("ev")
    acc = _forwarded("acc")
    ev_extra = _forwarded("ev_extra")

    def __init__(self, path: str | os.PathLike[str], meta: dict[str, Any], counters: Any) -> None:
        self.counters = counters
        super().__init__(path, meta)


def new_recorder(path: str | os.PathLike[str], meta: dict[str, Any]) -> Recorder:
    """The session's Recorder: a :class:`CountedRecorder` where the C module is used, else a
    plain one (the choice is made per session, as for the compiled wrappers)."""
    counters = compiled_piece("Counters")
    if counters is None:
        return Recorder(path, meta)
    return CountedRecorder(path, meta, counters())
