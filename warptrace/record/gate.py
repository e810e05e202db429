"""Recording schedules in the recorder: which steps become event rows (``--record-steps``,
``--record-last``; :mod:`warptrace.trace.schedule` defines steps and the ``meta.json`` entry).

One :class:`StepGate` per session (``Recorder.gate``; None without a schedule). The tape
wrappers call it at the step boundaries only (:meth:`StepGate.backward_end` after each
top-level ``tape.backward()``; :meth:`StepGate.tape_event` before the tape event that may
start the next step), so a launch pays nothing for the schedule:

- ``--record-steps``: outside the listed steps the session is *paused*: ``state.rec`` is None,
  so every event wrapper is the original call (one global read), while the wrappers that keep
  identity (allocations, views, grads, the ``requires_grad``/``retain_grad``/``.grad``
  attributes, tapes) read ``state.tracker`` and go on: allocations get their ``alloc_id`` and
  their interval in the index (their ``allocs`` row is written only if a recorded event reaches
  them, :attr:`Identity.defer`), attribute changes of arrays already in the trace are still
  events, and tapes made while paused get their id (their ``tape_create`` row is written when a
  recorded event first uses them). The sequence number skips one at each pause and resume,
  so nothing made in a gap looks "just made" to the first event after it.
- ``--record-last K``: every step is recorded, but the event, access and numerics rows are
  held in memory per step (:meth:`Recorder.flush` hands them here instead of to the writer),
  the oldest step dropped once ``K`` are held; the dimension tables (sites, kernels, arrays,
  allocations) are written as usual. The held steps are written when the run ends, or, when a
  numeric summary first sees a non-finite value (``--check-numerics``), at the end of that
  step (the rest of the run is then not recorded). Of a dropped step, the attribute changes and
  the creation of tapes still alive are kept (what a later step needs to read its arrays).
"""

from __future__ import annotations

import weakref
from collections import deque
from typing import Any

from warptrace.record import state
from warptrace.record.numerics import _width as numerics_width
from warptrace.trace.rows import EVENT_WIDTH
from warptrace.trace.schedule import (
    META_KEY,
    MODE_LAST,
    MODE_STEPS,
    TRIGGER_END,
    TRIGGER_NONFINITE,
    UNIT,
    StepRanges,
)
from warptrace.trace.schema import (
    EVENT_KIND_CODES,
    SET_GRAD,
    SET_REQUIRES_GRAD,
    SET_RETAIN_GRAD,
    TAPE_CREATE,
)

_TAPE_CREATE = EVENT_KIND_CODES[TAPE_CREATE]
# events of a dropped step that are kept (what later steps need to read their arrays)
_KEPT_KINDS = frozenset(EVENT_KIND_CODES[k] for k in (SET_REQUIRES_GRAD, SET_RETAIN_GRAD, SET_GRAD))
_TAPE_COLUMN = 2  # EVENT_ROW index of "tape"


class _Step:
    """The rows of one held step (flight recorder)."""

    __slots__ = ("acc", "ev", "extra", "first_seq", "numerics", "step")

    def __init__(self, step: int, first_seq: int) -> None:
        self.step = step
        self.first_seq = first_seq
        self.ev: list[int] = []
        self.acc: list[int] = []
        self.extra: list[Any] = []
        self.numerics: list[Any] = []


class StepGate:
    """Step counting and the switch between recording and tracking only (see the module)."""

    def __init__(self, rec: Any, ranges: StepRanges | None = None, last: int | None = None) -> None:
        self.rec = rec
        self.ranges = ranges
        self.last = last
        self.mode = MODE_LAST if last is not None else MODE_STEPS
        self.step = 0
        self.pending = False  # a backward ended: the next tape event starts a step
        self.recording = True
        self.windows: list[dict[str, int]] = []
        # the token of tapes made while paused (TAPE_ATTR (paused_tok, id, site)): their creation
        # row is written by wrap.common.tape_id_of when a recorded event first uses them
        self.paused_tok = object()
        # flight recorder: the held steps, the kept rows of dropped ones, the live tapes
        self.holding = self.mode == MODE_LAST
        self.held: deque[_Step] = deque()
        self.kept_ev: list[list[int]] = []  # event rows
        self.kept_extra: list[Any] = []
        self.tapes: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
        self.nonfinite_step = -1  # the step in which a value first became non-finite
        self.trigger = TRIGGER_END
        self.floor = 0  # released: the first seq written (numerics rows below it are dropped)

    # ---------------------------------------------------------------- meta
    def meta(self) -> dict[str, Any]:
        spec: Any = self.last if self.mode == MODE_LAST else (self.ranges.spec if self.ranges else "")
        out: dict[str, Any] = {"mode": self.mode, "spec": spec, "unit": UNIT, "steps": self.step + 1}
        out["windows"] = [dict(w) for w in self.windows]
        if self.mode == MODE_LAST:
            out["trigger"] = self.trigger
        return out

    def _update_meta(self) -> None:
        try:
            self.rec.writer.update_meta(**{META_KEY: self.meta()})
        except Exception as exc:  # pragma: no cover - disk trouble
            self.rec.fail(exc)

    # ---------------------------------------------------------------- boundaries
    def begin(self) -> None:
        """At start(), once the wrappers are bound: step 0."""
        with self.rec.lock:
            if self.mode == MODE_LAST:
                self.held.append(_Step(0, self.rec.seq))
            elif self.ranges is not None and not self.ranges.wants(0):
                self._pause()
            else:
                self.windows.append(
                    {"first_step": 0, "last_step": 0, "first_seq": self.rec.seq, "end_seq": -1}
                )
        self._update_meta()

    def backward_end(self) -> None:
        """A top-level ``tape.backward()`` returned: the next tape event starts the next step."""
        self.pending = True
        if self.nonfinite_step >= 0 and self.holding:
            try:
                with self.rec.lock:
                    self._release(TRIGGER_NONFINITE)
            except Exception as exc:  # a warptrace bug must not reach the program
                self.rec.fail(exc)

    def tape_event(self) -> None:
        """Before a top-level tape event (create, enter, reset, backward): a new step if pending."""
        if not self.pending:
            return
        try:
            self._next_step()
        except Exception as exc:  # a warptrace bug must not reach the program
            self.rec.fail(exc)

    def _next_step(self) -> None:
        rec = self.rec
        with rec.lock:
            if not self.pending:
                return
            self.pending = False
            self.step = step = self.step + 1
            if self.mode == MODE_LAST:
                if self.holding:
                    self._next_held(step)
                return
            want = self.ranges is not None and self.ranges.wants(step)
            if want and not self.recording:
                self._resume()
            elif not want and self.recording:
                self._pause()
            elif want:
                self.windows[-1]["last_step"] = step
                return
            else:
                return
        self._update_meta()

    # ---------------------------------------------------------------- --record-steps
    def _pause(self) -> None:
        rec = self.rec
        if self.windows and self.windows[-1]["end_seq"] < 0:
            self.windows[-1]["end_seq"] = rec.seq
        rec.seq += 1  # an unused number: nothing made in the gap looks made by the last event
        self.recording = False
        rec.ident.defer = True
        state.rec = None

    def _resume(self) -> None:
        rec = self.rec
        rec.seq += 1
        self.recording = True
        rec.ident.defer = False
        self.windows.append(
            {"first_step": self.step, "last_step": self.step, "first_seq": rec.seq, "end_seq": -1}
        )
        state.rec = rec

    # ---------------------------------------------------------------- --record-last
    def made_tape(self, tape: Any, tape_id: int) -> None:
        if self.holding:
            self.tapes[tape_id] = tape

    def hold(self, ev: list[int], extra: list[Any], acc: list[int]) -> None:
        """The rows a flush took out of the buffers: into the current step (lock held)."""
        if not self.held:
            self.held.append(_Step(self.step, self.rec.seq))
        step = self.held[-1]
        step.ev.extend(ev)
        step.extra.extend(extra)
        step.acc.extend(acc)

    def take_buffers(self) -> None:
        """A flush while holding (lock held): the buffered event rows go to the current step."""
        self._take_buffers()

    def submitted(self, batch: Any) -> Any:
        """Rows of other tables submitted to the writer (lock held): while holding, the numeric
        summaries are held with the current step (nothing is left to write); after, only those of
        the kept steps' events are written."""
        if self.holding:
            for name, rows in batch:
                if name == "numerics":
                    self.hold_numerics(rows)
            return ()
        return tuple((name, self.numerics_rows(rows) if name == "numerics" else rows) for name, rows in batch)

    def hold_numerics(self, rows: list[Any]) -> None:
        if not self.held:
            self.held.append(_Step(self.step, self.rec.seq))
        self.held[-1].numerics.extend(rows)

    def _next_held(self, step: int) -> None:
        rec = self.rec
        self._take_buffers()
        self.held.append(_Step(step, rec.seq))
        while len(self.held) > (self.last or 1):
            self._drop(self.held.popleft())

    def _take_buffers(self) -> None:
        rec = self.rec
        if rec.ev or rec.acc or rec.ev_extra:
            self.hold(rec.ev, rec.ev_extra, rec.acc)
            rec.ev, rec.ev_extra, rec.acc = [], [], []
            rec.disordered = True

    def _drop(self, dropped: _Step) -> None:
        """A step leaves the flight recorder: keep only its attribute changes and the creation of
        the tapes still alive."""
        ev = dropped.ev
        kinds = ev[1::EVENT_WIDTH]
        hits = [i for i, kind in enumerate(kinds) if kind in _KEPT_KINDS or kind == _TAPE_CREATE]
        if not hits:
            return
        alive = self.tapes
        kept = self.kept_ev
        seqs = set()
        for i in hits:
            row = ev[i * EVENT_WIDTH : (i + 1) * EVENT_WIDTH]
            if row[1] == _TAPE_CREATE and row[_TAPE_COLUMN] not in alive:
                continue
            kept.append(row)
            seqs.add(row[0])
        if seqs:
            self.kept_extra.extend(extra for extra in dropped.extra if extra[0] in seqs)

    def numerics_rows(self, rows: list[Any]) -> list[Any]:
        """Of flat ``numerics`` rows, those of events the flight recorder kept: a summary is
        submitted in batches, maybe steps after its event."""
        if self.floor <= 0 or not rows:
            return rows
        width, floor = numerics_width(), self.floor
        return [value for i in range(0, len(rows), width) if rows[i] >= floor
                for value in rows[i : i + width]]  # fmt: skip

    def nonfinite(self) -> None:
        """A numeric summary saw a non-finite value: write the held steps once this step ends."""
        if self.holding and self.nonfinite_step < 0:
            self.nonfinite_step = self.step

    def _release(self, trigger: str) -> None:
        """Write the held steps (lock held): they go back into the buffers in front of the rows
        not flushed yet, and the next flush writes them. After a non-finite value the session
        pauses for the rest of the run."""
        rec = self.rec
        if not self.holding:
            return
        self._take_buffers()
        self.holding = False
        self.trigger = trigger
        steps = list(self.held)
        self.held.clear()
        ev: list[int] = []
        extra: list[Any] = []
        acc: list[int] = []
        numerics: list[Any] = []
        tape_ids: set[int] = set()
        for step in steps:
            ev.extend(step.ev)
            extra.extend(step.extra)
            acc.extend(step.acc)
            numerics.extend(step.numerics)
        if ev:
            tape_ids = set(ev[_TAPE_COLUMN::EVENT_WIDTH])
        kept: list[int] = []
        for row in self.kept_ev:
            if row[1] != _TAPE_CREATE or row[_TAPE_COLUMN] in tape_ids:
                kept.extend(row)
        rec.ev = kept + ev
        rec.ev_extra = self.kept_extra + extra
        rec.acc = acc
        rec.disordered = True
        self.kept_ev, self.kept_extra = [], []
        if steps:
            last_step = steps[-1].step
            end_seq = rec.seq
            self.windows = [
                {"first_step": steps[0].step, "last_step": last_step, "first_seq": steps[0].first_seq,
                 "end_seq": end_seq}
            ]  # fmt: skip
        if steps:
            self.floor = steps[0].first_seq
            numerics = self.numerics_rows(numerics)
        if numerics:
            rec.flush(force=True)
            rec.submit((("numerics", numerics),))
        if trigger == TRIGGER_NONFINITE:  # (never resumes: no seq to skip)
            self.recording = False
            rec.ident.defer = True
            state.rec = None
        self._update_meta()

    def finish(self) -> None:
        """At stop(), before the last flush (lock held): close the window, write what is held.
        Never raises (a bug is noted: the trace must still close)."""
        try:
            self._finish()
        except Exception as exc:
            self.rec._note(exc)

    def _finish(self) -> None:
        if self.holding:
            self._release(TRIGGER_NONFINITE if self.nonfinite_step >= 0 else TRIGGER_END)
            return
        if self.recording and self.windows and self.windows[-1]["end_seq"] < 0:
            self.windows[-1]["end_seq"] = self.rec.seq
        self._update_meta()


__all__ = ["StepGate"]
