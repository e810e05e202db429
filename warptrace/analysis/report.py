"""Run the rules over a trace and collect the report."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from warptrace.analysis.findings import Finding, Severity, merge_findings, with_library_lines
from warptrace.analysis.health import health_timeline
from warptrace.analysis.model import Model
from warptrace.analysis.pages import small_pages
from warptrace.analysis.replay import expand_replays
from warptrace.analysis.rules import ALL_RULES, RULE_INFO
from warptrace.analysis.windows import restricted_meta, window_slices
from warptrace.progress import Progress
from warptrace.trace.reader import Trace
from warptrace.trace.schedule import StepRanges

NUMERIC = "numeric"  # the family of the rules that read the value summaries


@dataclass
class Report:
    """Findings of one trace, worst first, one per root cause."""

    trace_path: str
    meta: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)
    families_checked: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # what the trace held: launches, tapes, ...
    health: list[dict[str, Any]] = field(default_factory=list)  # --check-numerics: analysis.health
    # The model the rules read, kept for renderers that draw the run (HTML); not part of the result.
    model: Model | None = field(default=None, repr=False, compare=False)

    def worst(self) -> Severity | None:
        return max((f.severity for f in self.findings), default=None)

    def exit_code(self, fail_on: Severity = Severity.ERROR) -> int:
        worst = self.worst()
        return 1 if worst is not None and worst >= fail_on else 0

    def by_code(self, code: str) -> list[Finding]:
        return [f for f in self.findings if f.code == code]


def analyze_trace(trace: Trace, progress: Progress | None = None, steps: StepRanges | None = None) -> Report:
    """Run every rule over ``trace``; ``progress`` (if given) is told the stage as it goes.

    A trace recorded with a schedule is analyzed window by window (:mod:`.windows`); ``steps``
    restricts a full trace to those steps the same way (``analyze --steps``)."""
    if steps is not None:
        trace = dataclasses.replace(trace, meta=restricted_meta(trace, steps))
    slices = window_slices(trace)
    if slices is None:
        if progress is not None:
            progress.update("building the model")
        return analyze_model(build_model(trace), progress)
    reports = []
    for index, window in enumerate(slices):
        if progress is not None:
            progress.update(f"window {index + 1} of {len(slices)}: building the model")
        reports.append(analyze_model(build_model(window), progress))
    first = reports[0]
    counts: dict[str, int] = {}
    for report in reports:
        for key, value in report.counts.items():
            counts[key] = counts.get(key, 0) + value
    counts["arrays"] = max(report.counts.get("arrays", 0) for report in reports)
    return Report(
        trace_path=str(trace.path),
        meta=dict(trace.meta),
        findings=merge_findings([f for report in reports for f in report.findings]),
        families_checked=first.families_checked,
        counts=counts,
        health=[row for report in reports for row in report.health],
        model=None,  # (a renderer that draws the run builds the model of the whole trace)
    )


def build_model(trace: Trace) -> Model:
    """The model the rules read: the trace with graph captures replayed where they ran."""
    with small_pages(), collector_paused():
        return Model(*expand_replays(trace))


def analyze_model(model: Model, progress: Progress | None = None) -> Report:
    """Run every rule over an already built model (``diff`` keeps the model for its own views)."""
    with small_pages(), collector_paused():
        return _run_rules(model, progress)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off within the block (back on after, if it was on).

    The analysis builds hundreds of thousands of container objects that live until it ends (the
    model's records, provenance sets, per-call lists) and next to no cyclic garbage (the drone
    trace: under a thousand objects), so the collector's passes over the live ones are pure cost
    (drone: 0.2 CPU s). Reference counting still frees everything else as it goes."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _run_rules(model: Model, progress: Progress | None) -> Report:
    trace = model.trace
    findings: list[Finding] = []
    for rule in ALL_RULES:
        if progress is not None:
            progress.update(f"rule {', '.join(rule.codes)}")
        findings.extend(rule.check(model))
    for rule in ALL_RULES:
        if rule.review is not None:
            findings = rule.review(findings)
    return Report(
        trace_path=str(trace.path),
        meta=dict(trace.meta),
        findings=[with_library_lines(f) for f in merge_findings(findings)],
        families_checked=families_checked(trace),
        counts=model_counts(model),
        health=health_timeline(model),
        model=model,
    )


def families_checked(trace: Trace) -> list[str]:
    """The rule families the analysis of ``trace`` ran, in catalog order."""
    families = []
    for info in RULE_INFO.values():
        if info.family == NUMERIC and "numerics" not in trace.tables:
            continue  # the WT5xx rules need the value summaries of --check-numerics
        if info.family not in families:
            families.append(info.family)
    return families


def model_counts(model: Model) -> dict[str, int]:
    """The report's counts of one model (summed over the windows of a windowed analysis)."""
    from warptrace.analysis.model import K
    from warptrace.trace import schema as S

    launches = model.kind == K[S.LAUNCH]
    return {
        "events": int(model.n_events),
        "tapes": len(model.tapes),
        "launches": int(launches.sum()),
        "recorded_launches": int((launches & model.recorded & ~model.adjoint).sum()),
        "backward_calls": int((model.kind == K[S.BACKWARD_BEGIN]).sum()),
        "arrays": len(model.arrays),
    }
