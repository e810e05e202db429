"""The rule catalog: ``ALL_RULES`` is the explicit, ordered tuple of rules the analyzer runs.

Each rule module (or a module for a small group of codes sharing one mechanism) starts
with a docstring that is the rule's user documentation, defines one
:class:`~warptrace.analysis.findings.RuleInfo` per code and exposes
``RULE = Rule((infos...), check)``, where ``check(model) -> list[Finding]`` is a pure
function of the model. Helpers used by two rules live in :mod:`.common` (or in a module
named for the mechanism, e.g. :mod:`.post_loss`, :mod:`.duplicates`).

Adding a rule: one module under ``warptrace/analysis/rules/`` and one line below. The
order is the order of the report for findings that tie on severity and time.
"""

from __future__ import annotations

from warptrace.analysis.findings import RuleInfo
from warptrace.analysis.rules import (
    adjoint_assign,
    backward_disabled,
    backward_side_effect,
    component_reassign,
    custom_adjoint,
    dead_gradient,
    divergence,
    duplicate_launch,
    dynamic_loop_carry,
    grad_not_zeroed,
    in_kernel_overwrite,
    inplace_mul_div,
    manual_seed,
    nonfinite_origin,
    nonsmooth_point,
    objective_off_tape,
    overwrite_after_read,
    piecewise_constant,
    replay_side_effect,
    retain_grad_multiwrite,
    select_overflow,
    severed_chain,
    stale_grad_read,
    tape_not_reset,
    truncated_horizon,
    unchained_boundary,
    unconverged_iteration,
    untaped_producer,
    work_after_loss,
)
from warptrace.analysis.rules.common import Rule

__all__ = ["ALL_RULES", "RULE_INFO", "Rule"]

ALL_RULES: tuple[Rule, ...] = (
    in_kernel_overwrite.RULE,  # WT102, WT104 (one launch)
    overwrite_after_read.RULE,  # WT101, WT103, WT104 (across launches)
    work_after_loss.RULE,  # WT105
    duplicate_launch.RULE,  # WT201
    retain_grad_multiwrite.RULE,  # WT202
    grad_not_zeroed.RULE,  # WT203
    tape_not_reset.RULE,  # WT204
    severed_chain.RULE,  # WT301
    truncated_horizon.RULE,  # WT302
    unchained_boundary.RULE,  # WT303
    manual_seed.RULE,  # WT304
    objective_off_tape.RULE,  # WT305
    stale_grad_read.RULE,  # WT306
    backward_disabled.RULE,  # WT307
    backward_side_effect.RULE,  # WT308
    untaped_producer.RULE,  # WT309
    inplace_mul_div.RULE,  # WT401
    component_reassign.RULE,  # WT402
    dynamic_loop_carry.RULE,  # WT403
    adjoint_assign.RULE,  # WT404
    replay_side_effect.RULE,  # WT405
    select_overflow.RULE,  # WT406
    nonsmooth_point.RULE,  # WT407
    piecewise_constant.RULE,  # WT408
    nonfinite_origin.RULE,  # WT501 (--check-numerics traces only)
    custom_adjoint.RULE,  # WT502 (--check-numerics traces only)
    dead_gradient.RULE,  # WT503 (--check-numerics traces only)
    unconverged_iteration.RULE,  # WT504 (--check-numerics traces only)
    divergence.RULE,  # WT505 (--check-numerics traces only; names the error findings before it)
)

_BY_CODE = {info.code: info for rule in ALL_RULES for info in rule.infos}
RULE_INFO: dict[str, RuleInfo] = {code: _BY_CODE[code] for code in sorted(_BY_CODE)}
