"""A long trace analyzed window by window: memory bounded by the largest window, not the trace.

The whole-trace analysis (:func:`~warptrace.analysis.report.analyze_trace`) holds every event
and access row of the trace at once, with the model and dataflow built over them: about
1.5 GiB per million launches of a training loop, so a run of 20M launches does not fit on a
24 GiB machine. :func:`analyze_windowed` reads the trace in windows of consecutive events
(``read_trace(path, seq_range=...)``: only the Parquet parts that overlap a window are read),
runs the same rules over each, and merges the findings as one analysis would.

(:mod:`.windows` cuts a trace recorded with a schedule at its recorded steps, for what the
findings mean; this module cuts any trace where no recording spans the cut, for memory.)

Where a window may be cut (:func:`plan_windows`): only between two events that no tape
recording spans, a recording being the events of one tape from its first event (or the
event after a ``tape.reset()``) to its last one before the next reset. A training loop with
a fresh tape (or a reset) per iteration can be cut between any two iterations; a tape that
records the whole run leaves one window, the whole trace.

What a window sees of the past: nothing but the dimension tables (the kernels and call sites,
and the arrays and allocations created before the window's end). Each window is analyzed as a
run of its own, and the findings of all windows are merged as the rules' occurrences are
(``merge_findings``: one per root cause, counts added, the first window's evidence kept); a finding without a first
occurrence (``evidence["first_seq"]``: a kernel's source, not an event) is kept once, from the
first window that reports it. A rule whose proof needs events on both sides of a cut (state
carried from one iteration to the next with no tape recording over the cut) may count or miss
an occurrence there (the zoo cut at every recording: 24 of 307 programs lose a finding of
WT203/WT302/WT303/WT304/WT306/WT309/WT310/WT311, none gains one), so the windowed analysis is
an explicit choice (``analyze --window``), not the default. Traces with graph captures (replays move events
across the trace), value summaries (``--check-numerics``: the health timeline spans the run)
or marked incomplete (a killed run: the reader cuts a torn end at the trace's consistent
prefix) are analyzed whole, and so is a trace that fits in one window: the result is then the
ordinary analysis.

Measured on the synthetic training loop of ``tools/bench_analyze.py --scale``: findings
identical to the whole-trace analysis; 20M launches in 2.1 GiB, with the planner's columns
(every event's seq, tape and kind) and the arrays created so far still growing with the run
(docs/performance.md, "Analysis at scale").
"""

from __future__ import annotations

import gc
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from warptrace.analysis.findings import Finding, merge_findings, with_library_lines
from warptrace.analysis.model import K
from warptrace.analysis.pages import small_pages
from warptrace.analysis.report import (
    Report,
    analyze_trace,
    build_model,
    collector_paused,
    families_checked,
    model_counts,
)
from warptrace.analysis.rules import ALL_RULES
from warptrace.progress import Progress
from warptrace.trace import schema as S
from warptrace.trace.reader import read_trace

DEFAULT_WINDOW_EVENTS = 1_000_000  # about 0.7M launches of a training loop: ~1.2 GiB at peak
_PART = re.compile(r"part-(\d{5,})\.parquet")


@dataclass(frozen=True)
class Plan:
    """The windows of a trace and what the report counts over the whole run."""

    windows: list[Window]
    tapes: int  # distinct tape ids of the events


@dataclass(frozen=True)
class Window:
    """The events ``start_seq <= seq < stop_seq``."""

    start_seq: int
    stop_seq: int
    events: int


def _parts(path: Path, table: str) -> list[Path]:
    folder = path / table
    if not folder.is_dir():
        return []
    numbered = [(int(m.group(1)), entry) for entry in folder.iterdir() if (m := _PART.fullmatch(entry.name))]
    return [entry for _, entry in sorted(numbered)]


def _event_columns(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``seq``, ``tape`` and kind code of every event in seq order, read column by column
    (None when a part cannot be read: the whole-trace reader then says what is wrong)."""
    seqs, tapes, kinds = [], [], []
    names = pa.array(S.EVENT_KINDS, type=pa.string())
    try:
        for part in _parts(path, "events"):
            table = pq.read_table(part, columns=["seq", "tape", "kind"])
            seqs.append(table.column("seq").to_numpy().astype(np.int64))
            tapes.append(table.column("tape").fill_null(-1).to_numpy().astype(np.int32))
            codes = pc.index_in(table.column("kind"), value_set=names).fill_null(-1)
            kinds.append(codes.to_numpy(zero_copy_only=False).astype(np.int16))
    except (OSError, KeyError, pa.ArrowException):
        return None
    if not seqs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int16)
    seq = np.concatenate(seqs)
    del seqs
    tape = np.concatenate(tapes)
    del tapes
    kind = np.concatenate(kinds)
    if len(seq) > 1 and not bool(np.all(seq[1:] > seq[:-1])):  # the writer's order: no copies
        order = np.argsort(seq, kind="stable")
        seq, tape, kind = seq[order], tape[order], kind[order]
    return seq, tape, kind


def _complete(path: Path) -> bool:
    """Whether meta.json marks the trace complete (an incomplete one may end with a torn part,
    which the whole-trace reader cuts at its consistent prefix: it is analyzed whole)."""
    try:
        meta = json.loads((path / S.META_FILE).read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("complete") is True


def cut_points(tape: np.ndarray, kind: np.ndarray) -> np.ndarray:
    """Event positions ``i`` (in seq order) where a window may start: no tape recording spans
    events ``i - 1`` and ``i`` (see the module's docstring). Always includes 0 and ``len``."""
    n = len(tape)
    taped = np.flatnonzero(tape >= 0)
    if not len(taped):
        return np.arange(n + 1)
    resets = kind[taped] == K[S.TAPE_RESET]
    if not resets.any() and int(tape.max()) < 4 * n + 1024:  # one recording per tape: a table of ids
        first_ev, last_ev = _tape_bounds(tape[taped], taped)
    else:
        first_ev, last_ev = _recording_bounds(tape[taped].astype(np.int64), resets, taped)
    # cover[i]: recordings with first < i <= last (a cut before event i would split them)
    cover = np.zeros(n + 2, dtype=np.int32)
    np.add.at(cover, first_ev + 1, 1)
    np.add.at(cover, last_ev + 1, -1)
    np.cumsum(cover, out=cover)
    return np.flatnonzero(cover[: n + 1] == 0)


def _tape_bounds(ids: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First and last of ``positions`` per distinct id, by a table indexed by the ids (small
    non-negative ints), without sorting."""
    first = np.full(int(ids.max()) + 1, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, ids, positions)
    last = np.full(len(first), -1, dtype=np.int64)
    np.maximum.at(last, ids, positions)
    present = last >= 0
    return first[present], last[present]


def _recording_bounds(
    ids: np.ndarray, resets: np.ndarray, positions: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """First and last position of each recording (a tape's events up to and including a
    reset; the events after it start the next one)."""
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    resets_sorted = resets[order].astype(np.int64)
    new_tape = np.ones(len(order), dtype=bool)
    new_tape[1:] = sorted_ids[1:] != sorted_ids[:-1]
    # resets before each event of the same tape (exclusive running count within the tape)
    running = np.cumsum(resets_sorted) - resets_sorted
    base = np.maximum.accumulate(np.where(new_tape, running, 0))
    recording = np.empty(len(order), dtype=np.int64)
    recording[order] = running - base
    key = ids * (int(recording.max()) + 1) + recording
    _, first = np.unique(key, return_index=True)
    _, last_reversed = np.unique(key[::-1], return_index=True)
    return positions[first], positions[len(positions) - 1 - last_reversed]


def plan_windows(path: str | os.PathLike[str], window_events: int = DEFAULT_WINDOW_EVENTS) -> Plan | None:
    """The windows of the trace at ``path``, at most ``window_events`` events each where a cut
    allows (a longer tape recording is one window); None when the trace must be analyzed whole
    (graph captures, value summaries, unreadable events)."""
    trace_path = Path(path)
    if (trace_path / "numerics").is_dir() or not _complete(trace_path):
        return None
    columns = _event_columns(trace_path)
    if columns is None:
        return None
    seq, tape, kind = columns
    if np.any(kind == K[S.CAPTURE_BEGIN]) or np.any(kind == K[S.CAPTURE_LAUNCH]):
        return None
    n = len(seq)
    cuts = cut_points(tape, kind)
    seq_at = np.append(seq, seq[-1] + 1 if n else 0)  # the seq at each position, one past the end
    windows: list[Window] = []
    start = 0
    while start < n:
        # the last cut within the window's size, else the first one past it (a long recording)
        at = int(np.searchsorted(cuts, start + max(1, window_events), side="right")) - 1
        stop = int(cuts[at]) if int(cuts[at]) > start else int(cuts[min(at + 1, len(cuts) - 1)])
        stop = n if stop <= start else stop
        windows.append(Window(int(seq_at[start]), int(seq_at[stop]), stop - start))
        start = stop
    return Plan(windows, len(np.unique(tape[tape >= 0])))


def analyze_windowed(
    path: str | os.PathLike[str],
    window_events: int = DEFAULT_WINDOW_EVENTS,
    progress: Progress | None = None,
    plan: Plan | None = None,
) -> Report:
    """The report of the trace at ``path``, analyzed window by window (module docstring); the
    whole-trace :func:`~warptrace.analysis.report.analyze_trace` where it cannot be cut.
    ``plan``: the trace's :func:`plan_windows`, when the caller made it already."""
    plan = plan if plan is not None else plan_windows(path, window_events)
    if plan is None or len(plan.windows) <= 1:
        return analyze_trace(read_trace(path), progress)
    windows = plan.windows
    per_rule: list[list[Finding]] = [[] for _ in ALL_RULES]
    unplaced: dict[tuple[object, ...], Finding] = {}  # findings without a first occurrence, first report
    totals = {
        "events": 0,
        "tapes": 0,
        "launches": 0,
        "recorded_launches": 0,
        "backward_calls": 0,
        "arrays": 0,
    }
    meta: dict[str, object] = {}
    families: list[str] = []
    for number, window in enumerate(windows):
        if progress is not None:
            progress.update(f"window {number + 1}/{len(windows)}")
        trace = read_trace(path, seq_range=(window.start_seq, window.stop_seq))
        meta, families = dict(trace.meta), families_checked(trace)
        trace.tables.update(_created_before(trace.tables, window.stop_seq))
        model = build_model(trace)
        with small_pages(), collector_paused():
            for index, rule in enumerate(ALL_RULES):
                for finding in rule.check(model):
                    if isinstance(finding.evidence.get("first_seq"), int):
                        per_rule[index].append(finding)
                    else:
                        unplaced.setdefault(_identity(finding), finding)
        for name, value in model_counts(model).items():  # summed (tapes: below)
            totals[name] = totals[name] + value if name != "arrays" else value
        totals["tapes"] = plan.tapes  # a tape reset between windows records in both
        del model, trace
        gc.collect()  # the model and its dataflow refer to each other: free them before the next window
    findings = [finding for found in per_rule for finding in found] + list(unplaced.values())
    for rule in ALL_RULES:
        if rule.review is not None:
            findings = rule.review(findings)
    return Report(
        trace_path=str(path),
        meta=meta,
        findings=[with_library_lines(f) for f in merge_findings(findings)],
        families_checked=families,
        counts=totals,
        health=[],
    )


def _created_before(tables: dict[str, pa.Table], stop_seq: int) -> dict[str, pa.Table]:
    """The arrays and allocations the window can know: created before its end (or at an
    unknown seq). Those of later windows would only cost the window's model time, and a
    rule over every array would judge them on events they have none in."""
    kept: dict[str, pa.Table] = {}
    for name in ("arrays", "allocs"):
        if name in tables:
            seq = tables[name].column("seq")
            kept[name] = tables[name].filter(pc.or_kleene(pc.is_null(seq), pc.less(seq, stop_seq)))
    return kept


def _identity(finding: Finding) -> tuple[object, ...]:
    return (finding.code, finding.key, finding.location, finding.message, finding.count)
