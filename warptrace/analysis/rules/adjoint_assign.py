"""A custom adjoint that assigns instead of accumulating (WT404).

WT404 adjoint-assign
    Summary: a `@wp.func_grad` assigning `wp.adjoint[x] = ...` instead of `+=`
    Severity: error when the function is reached from a kernel argument that carries a gradient
    on a backpropagated tape; info when the kernel is taped but no gradient flows through the
    function; silent outside tapes
    Proves:
        A custom ``@wp.func_grad`` assigns ``wp.adjoint[x] = ...`` instead of accumulating
        ``wp.adjoint[x] += ...``: the contributions of the other uses of ``x`` are discarded.
    Mechanism:
        The adjoint of ``x`` already holds the contributions of the other uses of ``x`` (the
        reverse pass visits later uses first); ``=`` overwrites them (verified on Warp 1.19:
        ``sq(v) + 3 * v`` with ``wp.adjoint[x] = 2 * x * adj_ret`` gives ``2x`` instead of
        ``2x + 3``). It goes unnoticed while the argument has no other use, which is why a
        numeric check alone (WT502) may miss it.
    Evidence:
        The kernel-source model of the custom adjoints a recorded kernel reaches (stored in the
        trace with the kernel), their ``wp.adjoint[...]`` assignments, and the launch on a
        backpropagated tape.
    Example: wt502_assign_adjoint
    Fix:
        ``wp.adjoint[x] += ...``.
    Silent on:
        A custom adjoint that accumulates with ``+=`` (also of a function with a kink).
    Look-alikes: ok_num_kink_adjoint
    Warp documentation:
        "Differentiability", section "Custom Gradient Functions".
"""

from __future__ import annotations

from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import Model
from warptrace.analysis.rules.common import DOC_CUSTOM_GRAD, Rule
from warptrace.analysis.rules.kernel_uses import evidence_phrase, kernel_uses, source_finding, strongest

WT404 = RuleInfo(
    code="WT404",
    name="adjoint-assign",
    family="kernel",
    fix="accumulate: wp.adjoint[x] += ... (the adjoint already holds the contributions of other uses of x)",
    doc=DOC_CUSTOM_GRAD,
)


def check(model: Model) -> list[Finding]:
    findings = []
    for use in kernel_uses(model):
        if not use.taped:
            continue
        for function in use.source.custom_adjoints():
            for item in function.adjoint_assigns:
                if item.op != "=":
                    continue
                args = use.carries(function, function.params)
                severity = Severity.ERROR if args else Severity.INFO
                message = (
                    f"the custom adjoint of `{function.of}` assigns `wp.adjoint[{item.variable}] = ...`: it "
                    f"overwrites the gradient other uses of `{item.variable}` already contributed; "
                    f"{evidence_phrase(model, use, args)}"
                )
                findings.append(
                    source_finding(
                        model, WT404, severity, use, function, item.line, message, "adjoint assignment"
                    )
                )
    return strongest(findings)


RULE = Rule((WT404,), check)
