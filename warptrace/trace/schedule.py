"""Recording schedules: which steps of a long run are recorded (pure; shared by the recorder,
the CLI and the analysis).

A *step* is counted by backward calls: step 0 starts with the run, and step ``k + 1`` starts
at the first tape event (a ``wp.Tape()`` created, a ``with tape:`` entered, ``tape.reset()``,
or the next ``tape.backward()``) after the ``k``-th top-level ``tape.backward()`` returned. So
one step holds one backward and what consumes its gradients (the optimizer step, the
``tape.zero()`` after it), and it starts where the next iteration starts taping. A training
loop with one backward per iteration has one step per iteration.

Two schedules:

- ``--record-steps 0-4,100-104``: the listed steps (``N``, ``A-B``, ``A-`` for "from A to the
  end"), comma separated;
- ``--record-last K`` (the flight recorder): every step is recorded into memory, only the last
  ``K`` are kept, and they are written when the run ends, or, with ``--check-numerics``, once
  the step in which a value first became non-finite has ended.

Outside the recorded steps the recorder keeps tracking allocations, frees, array identity,
tape ids and the array attributes (``requires_grad``, ``retain_grad``, ``.grad``) so that the
arrays of a recorded step are identified as in a full recording; it records no event rows.
``meta.json`` ``recording`` (:data:`META_KEY`) says what was recorded: the schedule and one
entry per *window* (a maximal run of consecutive recorded steps) with its first and last
step and its range of event sequence numbers. The analysis runs the rules on each window on
its own (:mod:`warptrace.analysis.windows`), so no rule compares a step with one that was not
recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from warptrace.errors import UsageError

META_KEY = "recording"  # meta.json: {"mode", "spec", "unit", "windows", "steps", ...}
UNIT = "backward"  # what a step is counted by (see the module docstring)
MODE_STEPS = "steps"  # --record-steps
MODE_LAST = "last"  # --record-last
# What ended the flight recorder's window: the run's end, or the first non-finite value.
TRIGGER_END = "end"
TRIGGER_NONFINITE = "nonfinite"


@dataclass(frozen=True)
class StepRanges:
    """Inclusive step ranges, sorted and merged; ``last`` None: to the end of the run."""

    ranges: tuple[tuple[int, int | None], ...]
    spec: str

    def wants(self, step: int) -> bool:
        for first, last in self.ranges:
            if step < first:
                return False
            if last is None or step <= last:
                return True
        return False


def parse_steps(spec: str, option: str = "--record-steps") -> StepRanges:
    """``"0-4,100-104"`` (also ``"7"``, ``"10-"``) as :class:`StepRanges`; a :class:`UsageError`
    naming ``option`` and the bad item otherwise."""
    items: list[tuple[int, int | None]] = []
    text = spec.strip()
    if not text:
        raise UsageError(f"{option} needs steps, e.g. 0-4,100-104")
    for raw in text.split(","):
        item = raw.strip()
        first_text, dash, last_text = item.partition("-")
        try:
            first = int(first_text)
            last: int | None = first if not dash else (int(last_text) if last_text.strip() else None)
        except ValueError:
            raise UsageError(
                f"{option}: {item!r} is not a step or a range (N, A-B or A-; steps count from 0)"
            ) from None
        if first < 0 or (last is not None and last < first):
            raise UsageError(f"{option}: {item!r} is not a range of steps (A-B needs 0 <= A <= B)")
        items.append((first, last))
    items.sort(key=lambda r: r[0])
    merged: list[tuple[int, int | None]] = []
    for first, last in items:
        if merged:
            prev_first, prev_last = merged[-1]
            if prev_last is None or first <= prev_last + 1:
                merged[-1] = (prev_first, None if prev_last is None or last is None else max(prev_last, last))
                continue
        merged.append((first, last))
    return StepRanges(tuple(merged), text)


def parse_last(value: Any) -> int:
    """``--record-last K``: a positive number of steps."""
    try:
        count = int(value)
    except (TypeError, ValueError):
        count = 0
    if count < 1:
        raise UsageError(f"--record-last needs a positive number of steps, not {value!r}")
    return count


def format_ranges(ranges: list[tuple[int, int]]) -> str:
    """``[(0, 4), (100, 100)]`` as ``"0-4, 100"``."""
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def windows_of(meta: dict[str, Any]) -> list[dict[str, int]] | None:
    """The recorded windows of a trace's ``meta.json`` (``first_step``, ``last_step``,
    ``first_seq``, ``end_seq``), None for a trace recorded without a schedule."""
    recording = meta.get(META_KEY)
    if not isinstance(recording, dict):
        return None
    windows = recording.get("windows")
    if not isinstance(windows, list):
        return None
    good = []
    for window in windows:
        if isinstance(window, dict) and all(
            isinstance(window.get(key), int) for key in ("first_step", "last_step", "first_seq", "end_seq")
        ):
            good.append(window)
    return good


def describe(meta: dict[str, Any]) -> str | None:
    """One line for reports: which steps a scheduled recording holds, None without a schedule."""
    recording = meta.get(META_KEY)
    if not isinstance(recording, dict):
        return None
    windows = windows_of(meta) or []
    steps = recording.get("steps")
    ranges = [(w["first_step"], w["last_step"]) for w in windows]
    held = format_ranges(ranges) if ranges else "none"
    total = f" of {steps}" if isinstance(steps, int) else ""
    if recording.get("restricted"):
        how, what = f"analyze --steps {recording.get('spec')}", "analyzed steps"
    elif recording.get("mode") == MODE_STEPS:
        how, what = f"--record-steps {recording.get('spec')}", "recorded steps"
    else:
        how, what = f"--record-last {recording.get('spec')}", "recorded steps"
    text = f"{what} {held}{total} ({how}; a step is counted by {UNIT} calls)"
    if recording.get("trigger") == TRIGGER_NONFINITE:
        text += "; written at the first non-finite value"
    if isinstance(steps, int) and sum(b - a + 1 for a, b in ranges) < steps:
        left = "left out" if recording.get("restricted") else "not recorded"
        text += (
            f"; other steps {left}: rules compare steps within one window only, "
            f"and evidence in a step {left} is not seen"
        )
    return text


__all__ = [
    "META_KEY",
    "MODE_LAST",
    "MODE_STEPS",
    "TRIGGER_END",
    "TRIGGER_NONFINITE",
    "UNIT",
    "StepRanges",
    "describe",
    "format_ranges",
    "parse_last",
    "parse_steps",
    "windows_of",
]  # fmt: skip
