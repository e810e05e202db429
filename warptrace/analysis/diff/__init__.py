"""``warptrace diff BEFORE AFTER``: what a fix changed, from two traces alone (no Warp).

The two runs are aligned by role, never by address (``align``): files and call sites
by their source text, arrays by allocation site and name, program steps by kernel and
call site with repeated steps folded into loops. Then:

- findings are resolved / introduced / unchanged (``findings``), robust to line shifts;
- structural changes (``structure``; program steps in ``steps``; both see the runs
  through ``sides``) say what the edit did to the program's gradient machinery: steps
  added, removed or moved (onto or off a tape, across a backward), buffers that became
  distinct or merged, ``requires_grad``/``retain_grad`` flips, tapes added, removed or
  merged, kernels whose gradient-relevant facts changed, and parameter-to-loss
  gradient paths gained or lost;
- numbers (``numbers``) when both traces carry numeric summaries.

Each run is reduced to a :class:`~warptrace.analysis.diff.profile.Profile` first and
its model dropped, so two large runs never sit in memory together.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

from warptrace.analysis.diff.align import SiteMap, match_files, match_sites
from warptrace.analysis.diff.changes import Change, MatchedFinding, TraceDiff
from warptrace.analysis.diff.findings import match_findings
from warptrace.analysis.diff.numbers import compare_numbers
from warptrace.analysis.diff.profile import Profile, build_profile
from warptrace.analysis.diff.structure import StructureDiff
from warptrace.analysis.findings import Finding
from warptrace.trace.reader import Trace

__all__ = ["Change", "MatchedFinding", "TraceDiff", "diff_profiles", "diff_traces"]

# below this share of aligned steps, and of step kinds, the runs are reported as different programs
RELATED_SHARE = 0.3
KINDS_SHARE = 0.5


def diff_traces(before: Trace | Callable[[], Trace], after: Trace | Callable[[], Trace]) -> TraceDiff:
    """Compare two traces (BEFORE is analyzed and reduced first, then AFTER).

    Each may be a loaded trace or a function that loads it: given loaders, BEFORE's tables
    are freed with its model before AFTER is read, so two large runs never sit in memory
    together (what ``diff`` on the command line does)."""
    profile_a = build_profile(before() if callable(before) else before)
    gc.collect()  # BEFORE's model and dataflow refer to each other: free them before AFTER's
    profile_b = build_profile(after() if callable(after) else after)
    return diff_profiles(profile_a, profile_b)


def diff_profiles(a: Profile, b: Profile) -> TraceDiff:
    """Compare two reduced runs (a profile can be compared with several others)."""
    kernel_files_a = {key: facts.file for key, facts in a.kernels.items()}
    kernel_files_b = {key: facts.file for key, facts in b.kernels.items()}
    files = match_files(a.sites.values(), b.sites.values(), kernel_files_a, kernel_files_b)
    sites = match_sites(a.sites, b.sites, a.kernels_at, b.kernels_at, files)
    resolved, introduced, unchanged = match_findings(a.report.findings, b.report.findings, sites)
    structure = StructureDiff(a, b, sites)
    changes = structure.run()

    steps_a, steps_b = int(a.token_events.sum()), int(b.token_events.sum())
    matched_steps = structure.aligned_steps()
    step_share = matched_steps / max(steps_a, steps_b, 1)
    site_share = sites.matched / max(sites.n_a, sites.n_b, 1)
    # call sites share boilerplate (`tape = wp.Tape()`); the steps a program runs tell programs apart
    if max(steps_a, steps_b):
        # most events in common, or most kinds of step (a loop that now runs 10x longer)
        related = step_share >= RELATED_SHARE or structure.kinds_share >= KINDS_SHARE
    else:
        related = site_share >= RELATED_SHARE or max(sites.n_a, sites.n_b) == 0
    _mark_explanations(changes, resolved, introduced, sites)
    changes.sort(key=lambda c: (not c.explains, c.rank))
    return TraceDiff(
        before_path=a.path,
        after_path=b.path,
        before_meta=a.meta,
        after_meta=b.meta,
        resolved=resolved,
        introduced=introduced,
        unchanged=unchanged,
        changes=changes,
        numbers=compare_numbers(a.numbers, b.numbers),
        alignment={
            "related": related,
            "steps_before": steps_a,
            "steps_after": steps_b,
            "steps_matched": matched_steps,
            "sites_before": sites.n_a,
            "sites_after": sites.n_b,
            "sites_matched": sites.matched,
        },
    )


def _mark_explanations(
    changes: list[Change], resolved: list[Finding], introduced: list[Finding], sites: SiteMap
) -> None:
    """A change explains a finding when it touches one of the finding's lines (in either run,
    through the matched call sites) or is about a kernel or array the finding names."""
    b_to_a = {(b.file, b.line): (a.file, a.line) for a, b in sites.pairs}
    a_to_b = {place_a: place_b for place_b, place_a in b_to_a.items()}
    for findings, side in ((resolved, "before"), (introduced, "after")):
        for finding in findings:
            lines = {(loc.file, loc.line) for loc in [finding.location, *finding.related]}
            for change in changes:
                own, other = (
                    (change.before, change.after) if side == "before" else (change.after, change.before)
                )
                mapping = b_to_a if side == "before" else a_to_b
                places = {(loc.file, loc.line) for loc in own}
                places |= {mapping[(loc.file, loc.line)] for loc in other if (loc.file, loc.line) in mapping}
                touches = places & lines or any(f"`{name}`" in finding.message for name in change.subjects)
                if touches and finding.code not in change.explains:
                    change.explains.append(finding.code)
