"""Findings: what a rule proves, where, and how to fix it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any


class Severity(IntEnum):
    """Ordered so that ``max()`` gives the worst. ``error``: gradients are wrong;
    ``warning``: likely wrong or fragile; ``info``: worth knowing, gradients fine."""

    INFO = 1
    WARNING = 2
    ERROR = 3

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r} (use error, warning or info)") from None


@dataclass(frozen=True, order=True)
class Location:
    """A user source line. ``role`` says what happens there ("overwrite", "read", "allocation")."""

    file: str
    line: int
    role: str = ""
    text: str = ""  # the stripped source line, for the report
    function: str = ""
    # (file, line, text, function) of the innermost library line this user line calls
    # through (the launch inside a solver's step()), or () when the user line calls Warp itself
    inside: tuple[str, int, str, str] | tuple[()] = ()

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    def inside_location(self) -> Location | None:
        """The library line as a related location of its own (role "inside"), or None."""
        if not self.inside:
            return None
        file, line, text, function = self.inside
        return Location(file=file, line=line, role=INSIDE, text=text, function=function)


INSIDE = "inside"  # the role of a library line kept beside the user line that calls it


def with_library_lines(finding: Finding) -> Finding:
    """``finding`` with the library line behind each of its user lines (the location and the
    related ones) as a related location ("inside"), right after the line it refines."""
    located = [finding.location, *finding.related]
    if not any(loc.inside for loc in located):
        return finding
    related: list[Location] = []
    head = finding.location.inside_location()
    if head is not None:
        related.append(head)
    for loc in finding.related:
        related.append(loc)
        inner = loc.inside_location()
        if inner is not None:
            related.append(inner)
    finding.related = related
    return finding


@dataclass(frozen=True)
class RuleInfo:
    """Static metadata of one rule code."""

    code: str
    name: str
    family: str  # "memory", "accumulation", "flow", "kernel", "numeric"
    fix: str
    doc: str  # Warp documentation section to read


@dataclass
class Finding:
    """One root cause. ``count`` is how many times it occurred (e.g. once per training iteration)."""

    code: str
    name: str
    severity: Severity
    message: str
    location: Location
    related: list[Location] = field(default_factory=list)
    fix: str = ""
    doc: str = ""
    count: int = 1
    evidence: dict[str, Any] = field(default_factory=dict)  # seqs, array ids, alloc ids
    key: tuple = ()  # dedup key: findings with equal (code, key) are merged

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity.label,
            "message": self.message,
            "location": _loc(self.location),
            "related": [_loc(loc) for loc in self.related],
            "count": self.count,
            "fix": self.fix,
            "doc": self.doc,
            "evidence": self.evidence,
        }


def _loc(loc: Location) -> dict[str, Any]:
    return {"file": loc.file, "line": loc.line, "role": loc.role, "text": loc.text, "function": loc.function}


def merge_findings(findings: list[Finding]) -> list[Finding]:
    """One finding per root cause: equal (code, key, location) merge, counts add, related lines union;
    an info finding is dropped where the same rule already reports worse on the same line.

    Ordered by severity (worst first), then by first occurrence (evidence["first_seq"])."""
    merged: dict[tuple, Finding] = {}
    for finding in findings:
        dedup = (finding.code, finding.key or (finding.location.file, finding.location.line, finding.message))
        if dedup not in merged:
            merged[dedup] = finding
            continue
        kept = merged[dedup]
        kept.count += finding.count
        kept.severity = max(kept.severity, finding.severity)
        for loc in finding.related:
            if loc not in kept.related:
                kept.related.append(loc)
    # An info finding on a line that already carries a worse finding of the same rule adds
    # nothing the user acts on (same line to change, same fix): keep the worse one only.
    worse = {
        (f.code, f.location.file, f.location.line) for f in merged.values() if f.severity > Severity.INFO
    }
    result = [
        f
        for f in merged.values()
        if f.severity > Severity.INFO or (f.code, f.location.file, f.location.line) not in worse
    ]
    return sorted(result, key=lambda f: (-int(f.severity), f.evidence.get("first_seq", 0), f.code))
