"""Findings resolved, introduced and unchanged, matched robustly to the edit.

Two findings are the same root cause when they have the same rule code and point at the
same user line, the line being recognised by its file (mapped between runs), function
and source text, not its number: lines inserted above a finding move it, they do not
resolve it. When several lines have that text, the one closest to where the shift
around it predicts wins (then the one whose message, numbers aside, is the same); a
finding whose line text changed still matches the finding of the same rule at the
predicted line.
"""

from __future__ import annotations

import re
from collections import defaultdict

from warptrace.analysis.diff.align import COMPREHENSIONS, SiteMap, normalize_text
from warptrace.analysis.diff.changes import MatchedFinding
from warptrace.analysis.findings import Finding, Location


def match_findings(
    before: list[Finding], after: list[Finding], sites: SiteMap
) -> tuple[list[Finding], list[Finding], list[MatchedFinding]]:
    """(resolved from BEFORE, introduced from AFTER, unchanged pairs)."""
    by_text: dict[tuple[str, str, str, str], list[int]] = defaultdict(list)
    by_line: dict[tuple[str, str, int], list[int]] = defaultdict(list)
    for index, finding in enumerate(after):
        loc = finding.location
        file = sites.canon_file(loc.file, "b")
        if loc.text:
            by_text[(finding.code, file, _scope(loc), normalize_text(loc.text))].append(index)
        by_line[(finding.code, file, loc.line)].append(index)
    used: set[int] = set()
    resolved: list[Finding] = []
    unchanged: list[MatchedFinding] = []
    for finding in before:
        loc = finding.location
        predicted = loc.line + sites.line_shift(loc.file, loc.line)
        candidates = [
            i
            for i in by_text.get((finding.code, loc.file, _scope(loc), normalize_text(loc.text)), ())
            if i not in used
        ]
        if not candidates or not loc.text:
            candidates = [i for i in by_line.get((finding.code, loc.file, predicted), ()) if i not in used]
        if not candidates:
            resolved.append(finding)
            continue
        gist = _gist(finding.message)
        best = min(
            candidates,
            key=lambda i: (abs(after[i].location.line - predicted), _gist(after[i].message) != gist, i),
        )
        used.add(best)
        unchanged.append(MatchedFinding(before=finding, after=after[best]))
    introduced = [f for i, f in enumerate(after) if i not in used]
    return resolved, introduced, unchanged


def _scope(loc: Location) -> str:
    return "<comp>" if loc.function in COMPREHENSIONS else loc.function


def _gist(message: str) -> str:
    """A message without its numbers (line numbers move with the edit)."""
    return re.sub(r"\d+", "#", message)
