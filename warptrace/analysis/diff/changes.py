"""The records a diff produces: :class:`Change` (one structural difference) and :class:`TraceDiff`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from warptrace.analysis.diff.numbers import NumberChange
from warptrace.analysis.findings import Finding, Location, Severity

# Change kinds, most telling first: the rank orders a report after "explains a finding".
KIND_RANK: dict[str, int] = {
    "requires_grad": 10,
    "retain_grad": 10,
    "buffers_distinct": 10,
    "buffers_merged": 10,
    "memory_changed": 11,
    "moved_onto_tape": 10,
    "moved_off_tape": 10,
    "moved_between_tapes": 10,
    "backward_loss": 12,
    "fill_value": 12,
    "grad_shared": 10,
    "kernel_changed": 13,
    "tape_zero_added": 14,
    "tape_zero_removed": 14,
    "tape_zero_moved": 14,
    "tape_reset_added": 14,
    "tape_reset_removed": 14,
    "tape_reset_moved": 14,
    "backward_added": 14,
    "backward_removed": 14,
    "backward_moved": 14,
    "record_func_added": 14,
    "record_func_removed": 14,
    "record_func_moved": 14,
    "grad_path_gained": 16,
    "grad_path_lost": 16,
    "launch_added": 20,
    "launch_removed": 20,
    "launch_moved": 20,
    "copy_added": 20,
    "copy_removed": 20,
    "copy_moved": 20,
    "memset_added": 20,
    "memset_removed": 20,
    "memset_moved": 20,
    "native_added": 22,
    "native_removed": 22,
    "native_moved": 22,
    "tape_added": 24,
    "tape_removed": 24,
    "tapes_merged": 24,
    "tape_split": 24,
    "repeat_count": 26,
    "kernel_source": 30,
    "allocations": 32,
    "read_added": 40,
    "read_removed": 40,
    "read_moved": 40,
}


@dataclass
class Change:
    """One structural difference between BEFORE and AFTER, said once however often it repeats."""

    kind: str  # a KIND_RANK key
    message: str  # one sentence in the user's terms
    before: list[Location] = field(default_factory=list)  # where in BEFORE
    after: list[Location] = field(default_factory=list)  # where in AFTER
    times: int = 1  # events it stands for (a change inside a 200-step loop body: 200)
    subjects: list[str] = field(default_factory=list)  # kernel and array names it is about
    explains: list[str] = field(default_factory=list)  # resolved/introduced finding codes it touches

    @property
    def rank(self) -> int:
        return KIND_RANK.get(self.kind, 50)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "message": self.message,
            "before": [_loc(loc) for loc in self.before],
            "after": [_loc(loc) for loc in self.after],
            "times": self.times,
            "subjects": list(self.subjects),
            "explains": list(self.explains),
        }


@dataclass
class MatchedFinding:
    """A finding present in both runs."""

    before: Finding
    after: Finding


@dataclass
class TraceDiff:
    """What changed from BEFORE to AFTER."""

    before_path: str
    after_path: str
    before_meta: dict[str, Any]
    after_meta: dict[str, Any]
    resolved: list[Finding] = field(default_factory=list)  # from BEFORE
    introduced: list[Finding] = field(default_factory=list)  # from AFTER
    unchanged: list[MatchedFinding] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)  # explaining ones first
    numbers: list[NumberChange] = field(default_factory=list)
    alignment: dict[str, Any] = field(default_factory=dict)  # how much of the two runs lined up

    @property
    def related(self) -> bool:
        """False when the two traces look like different programs."""
        return bool(self.alignment.get("related", True))

    def new_errors(self) -> list[Finding]:
        """Errors of AFTER that BEFORE did not have (introduced, or escalated to error)."""
        escalated = [
            m.after
            for m in self.unchanged
            if m.after.severity == Severity.ERROR and m.before.severity < Severity.ERROR
        ]
        return [f for f in self.introduced if f.severity == Severity.ERROR] + escalated

    def exit_code(self) -> int:
        """1 when AFTER has error findings BEFORE did not, else 0 (the CI gate)."""
        return 1 if self.new_errors() else 0


def _loc(loc: Location) -> dict[str, Any]:
    return {"file": loc.file, "line": loc.line, "text": loc.text, "function": loc.function}
