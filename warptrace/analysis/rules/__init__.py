"""The rule catalog. ``ALL_RULES`` is the explicit, ordered tuple the analyzer runs.

A rule is a pure function ``check(model) -> list[Finding]``; each rule module starts
with a docstring that is the rule's user documentation and exposes ``RULES``, a tuple
of :class:`~warptrace.analysis.findings.RuleInfo` for the codes it can report.
"""

from __future__ import annotations

from collections.abc import Callable

from warptrace.analysis.findings import Finding, RuleInfo
from warptrace.analysis.model import Model
from warptrace.analysis.rules import accumulation, flow, memory

Rule = Callable[[Model], list[Finding]]

ALL_RULES: tuple[Rule, ...] = (memory.check, accumulation.check, flow.check)
RULE_INFO: dict[str, RuleInfo] = {
    info.code: info for info in (*memory.RULES, *accumulation.RULES, *flow.RULES)
}
