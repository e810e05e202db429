"""A wp.where operand that can be non-finite on the unselected side (WT406).

WT406 select-overflow
    Summary: a `wp.where` operand that can be non-finite on the unselected side: NaN gradient
    Severity: warning when the operand depends on a kernel argument that carries a gradient on a
    backpropagated tape (a NaN needs the bad value at run time); silent otherwise
    Proves:
        An operand of ``wp.where(c, a, b)`` (``wp.select`` before Warp 1.19) can be non-finite on
        the side that is not selected: ``wp.exp(z)`` overflowing, ``wp.log``/``wp.sqrt``/
        ``wp.pow`` at or below zero, a division by a possibly-zero denominator. The gradient
        becomes NaN while the forward value is clean.
    Mechanism:
        Both operands are evaluated and both adjoints run; the unselected side's adjoint
        multiplies a zero by an infinite derivative, and the NaN poisons the gradient (verified
        on Warp 1.19: ``wp.where(z > 50, z, wp.exp(z))`` at ``z = 100`` gives a NaN gradient;
        ``wp.where(z > 0, wp.log(z), 0)`` at ``z = 0`` too). Python's conditional expression
        ``a if c else b`` compiles to a branch and has no such problem.
    Evidence:
        The kernel-source model: ``wp.where``/``wp.select`` operands and what guards their
        arguments (``kernel_source.guards``), the launch on a backpropagated tape and the
        arguments carrying a gradient.
    Example: wt406_safe_log
    Fix:
        "Double where": make the argument safe on the unselected side
        (``wp.where(z > 0, wp.log(wp.where(z > 0, z, 1.0)), 0.0)``), clamp it, or use
        ``if``/``else``.
    Silent on:
        ``wp.exp(wp.min(z, c))``, ``wp.log(wp.max(z, eps))``, ``wp.sqrt(d2 + 1e-8)``, an inner
        ``wp.where`` as the argument (the double where), constant arguments, operands that
        read nothing per thread, selects over finite operands, conditional expressions.
    Look-alikes: ok_src_guards
    Warp documentation:
        "Differentiability", section "Debugging Gradients".
"""

from __future__ import annotations

from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import Model
from warptrace.analysis.rules.common import DOC_DEBUG, Rule
from warptrace.analysis.rules.kernel_uses import evidence_phrase, kernel_uses, source_finding, strongest

WT406 = RuleInfo(
    code="WT406",
    name="select-overflow",
    family="kernel",
    fix="'double where': make the risky argument finite on the unselected side too "
    "(wp.log(wp.where(z > 0.0, z, 1.0))), clamp it, or use a real if/else",
    doc=DOC_DEBUG,
)


def check(model: Model) -> list[Finding]:
    findings = []
    for use in kernel_uses(model):
        if not use.backpropagated:
            continue
        for function in use.source.differentiated_functions():
            for select in function.selects:
                if select.kind == "ifexp":
                    continue
                for operand, hazards, names in zip(select.operands, select.hazards, select.operand_names):
                    if not hazards:
                        continue
                    args = use.carries(function, names)
                    if not args:
                        continue
                    risky = ", ".join(f"`{h}`" for h in hazards)
                    message = (
                        f"`wp.{select.kind}({select.condition}, ...)` evaluates `{operand}` on both sides and "
                        f"runs its adjoint even where it is not selected; {risky} there can be non-finite, "
                        f"which turns the gradient into NaN while the forward value is clean; "
                        f"{evidence_phrase(model, use, args)}"
                    )
                    findings.append(
                        source_finding(
                            model, WT406, Severity.WARNING, use, function, select.line, message, "select"
                        )
                    )
    return strongest(findings)


RULE = Rule((WT406,), check)
