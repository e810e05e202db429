"""Recorded windows: a trace recorded with a schedule (``--record-steps``, ``--record-last``),
or a full trace restricted to some steps (``analyze --steps``), analyzed window by window.

A *window* is a run of consecutive recorded steps (:mod:`warptrace.trace.schedule`). The
rules run on each window on its own, so none compares a step with a step that was not
recorded (the gradients a missing backward left, a ``tape.zero()`` in a gap): across a gap
they would report hazards the run does not have. A window's slice of the trace holds its own
events and accesses plus, from before it, the events that say how to read its arrays and tapes
(``requires_grad``/``retain_grad``/``.grad`` changes, the creation of the tapes it uses); the
other tables (arrays, allocations, kernels, sites) are whole. The findings of the windows are
merged as the findings of one trace are (one per root cause, counts added).

:func:`step_windows` finds the steps of a full trace exactly as the recorder counts them while
it runs, so that a full recording restricted to some steps and a recording scheduled on them
hold the same events (a test compares their findings on the zoo).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from warptrace.trace import schema as S
from warptrace.trace.reader import Trace
from warptrace.trace.schedule import META_KEY, MODE_STEPS, UNIT, StepRanges, windows_of

_CARRIED = (S.SET_REQUIRES_GRAD, S.SET_RETAIN_GRAD, S.SET_GRAD)  # kept from before a window
_TRIGGERS = (S.TAPE_CREATE, S.TAPE_ENTER, S.TAPE_RESET, S.BACKWARD_BEGIN)


def step_windows(trace: Trace, ranges: StepRanges) -> tuple[list[dict[str, int]], int]:
    """The windows of ``ranges`` in a full trace, as ``meta.json`` ``recording`` lists them, and
    the number of steps the trace holds. Step ``k + 1`` starts at the first tape event (tape
    created, entered or reset, or a backward) outside a backward after the ``k``-th backward
    ended (the recorder's rule, :mod:`warptrace.record.gate`)."""
    ev = trace.tables["events"]
    seq = ev.column("seq").to_numpy()
    kind = ev.column("kind").cast(pa.string()).to_numpy(zero_copy_only=False)
    phase = ev.column("phase").to_numpy()
    detail = ev.column("detail")
    order = np.argsort(seq, kind="stable")
    seq, kind, phase = seq[order], kind[order], phase[order]
    ends = kind == S.BACKWARD_END
    triggers = np.isin(kind, _TRIGGERS) & ((phase == 0) | (kind == S.BACKWARD_BEGIN))
    interesting = np.flatnonzero(ends | triggers)
    details = detail.take(pa.array(order[interesting])).to_pylist() if interesting.size else []
    starts = [0]  # seq at which each step starts
    pending = False
    for position, i in enumerate(interesting.tolist()):
        if ends[i]:
            pending = True
        elif pending and '"preexisting"' not in (details[position] or ""):
            pending = False
            starts.append(int(seq[i]))
    end = int(seq[-1]) + 1 if seq.size else 0
    windows: list[dict[str, int]] = []
    for step, first in enumerate(starts):
        if not ranges.wants(step):
            continue
        stop = starts[step + 1] if step + 1 < len(starts) else end
        if windows and windows[-1]["last_step"] == step - 1:
            windows[-1]["last_step"] = step
            windows[-1]["end_seq"] = stop
        else:
            windows.append({"first_step": step, "last_step": step, "first_seq": first, "end_seq": stop})
    return windows, len(starts)


def restricted_meta(trace: Trace, ranges: StepRanges) -> dict[str, Any]:
    """``trace.meta`` with the ``recording`` entry a scheduled recording of ``ranges`` would have."""
    windows, steps = step_windows(trace, ranges)
    meta = dict(trace.meta)
    meta[META_KEY] = {
        "mode": MODE_STEPS,
        "spec": ranges.spec,
        "unit": UNIT,
        "steps": steps,
        "windows": windows,
        "restricted": True,  # analyze --steps: a full trace, restricted when analyzed
    }
    return meta


WINDOW_KEY = "window"  # the slice's meta: the window it holds (first_step, ..., end_seq)


def window_slices(trace: Trace) -> list[Trace] | None:
    """One trace per recorded window, or None when the trace is read whole (recorded without a
    schedule, or in one window from step 0 with nothing recorded outside it)."""
    windows = windows_of(trace.meta)
    if windows is None:
        return None
    if not windows:
        return [_slice(trace, {"first_step": 0, "last_step": -1, "first_seq": 0, "end_seq": 0})]
    if len(windows) == 1 and windows[0]["first_step"] == 0:
        window = windows[0]
        seqs = trace.tables["events"].column("seq")
        hi = pc.max(seqs).as_py() if len(seqs) else -1
        if window["end_seq"] < 0 or (hi if hi is not None else -1) < window["end_seq"]:
            return None
    return [_slice(trace, window) for window in windows]


def unrecorded_before(model: Any) -> int:
    """The first seq of the model's window when steps before it were not recorded (evidence in
    them is not in the trace: a rule whose claim needs the run's history says "not recorded"
    instead of guessing), else -1."""
    window = model.meta.get(WINDOW_KEY)
    if isinstance(window, dict) and window.get("first_step", 0) > 0:
        return int(window.get("first_seq", 0))
    return -1


def _slice(trace: Trace, window: dict[str, int]) -> Trace:
    """The events of the window's ``[first_seq, end_seq)`` (``end_seq`` -1: to the end) with what
    they need from before."""
    first, end = window["first_seq"], window["end_seq"]
    ev = trace.tables["events"]
    seq = ev.column("seq")
    inside = pc.greater_equal(seq, first)
    if end >= 0:
        inside = pc.and_(inside, pc.less(seq, end))
    before = pc.less(seq, first)
    carried = pc.and_(before, pc.is_in(ev.column("kind"), value_set=pa.array(_CARRIED, type=pa.string())))
    tapes = pc.unique(ev.filter(inside).column("tape"))
    created = pc.and_(
        pc.and_(before, pc.equal(ev.column("kind"), S.TAPE_CREATE)),
        pc.is_in(ev.column("tape"), value_set=tapes),
    )
    tables = dict(trace.tables)
    tables["events"] = ev.filter(pc.or_(inside, pc.or_(carried, created)))
    for name in ("accesses", "numerics"):
        table = tables.get(name)
        if table is None:
            continue
        keep = pc.greater_equal(table.column("seq"), first)
        if end >= 0:
            keep = pc.and_(keep, pc.less(table.column("seq"), end))
        tables[name] = table.filter(keep)
    meta = dict(trace.meta)
    meta[WINDOW_KEY] = dict(window)
    return dataclasses.replace(trace, tables=tables, meta=meta)


__all__ = ["WINDOW_KEY", "restricted_meta", "step_windows", "unrecorded_before", "window_slices"]
