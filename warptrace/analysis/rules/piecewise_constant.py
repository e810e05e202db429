"""Step functions on a gradient path: the zero gradient is correct (WT408).

WT408 piecewise-constant
    Summary: `round`, `floor`, `sign`, integer casts or comparisons on a gradient path: zero gradient, correctly
    Severity: info
    Proves:
        ``wp.round``, ``wp.floor``, ``wp.ceil``, ``wp.trunc``, ``wp.sign``, ``wp.step``, an integer
        cast (``int(x)``, ``wp.int32(x)``) or a comparison turned into a number
        (``float(x > 0)``, ``(x > 0) * w``) is applied to a value that depends on a kernel
        argument carrying a gradient on a backpropagated tape. The gradient through it is
        zero, and that is *correct*: reported so that a surprising zero gradient has an
        explanation, never as an error.
    Mechanism:
        The derivative of a step function is zero almost everywhere, and Warp's adjoints say
        so. Finite differences across the steps disagree with it without proving anything.
    Evidence:
        The kernel-source model (the call or cast and the value it applies to), the launch on a
        backpropagated tape and the arguments carrying a gradient.
    Example: wt408_quantize (no fixed twin: the zero gradient is right; the fix is a modeling
        choice)
    Fix:
        A modeling choice, not a repair: a straight-through estimator (forward the rounded value,
        backward the identity: a ``@wp.func`` with a ``@wp.func_grad`` that passes the adjoint
        through), or a smooth surrogate (a sigmoid instead of a step, soft rounding).
    Silent on:
        Comparisons used as branch conditions or boolean flags (``if``, ``wp.where`` conditions,
        ``inside = a < b``, a conditional expression); integer index arithmetic.
    Look-alikes: ok_src_guards
    Warp documentation:
        "Differentiability", section "Custom Gradient Functions".
"""

from __future__ import annotations

from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import Model
from warptrace.analysis.rules.common import DOC_CUSTOM_GRAD, Rule
from warptrace.analysis.rules.kernel_uses import (
    CASTS,
    STEPS,
    evidence_phrase,
    kernel_uses,
    source_finding,
    strongest,
)

WT408 = RuleInfo(
    code="WT408",
    name="piecewise-constant",
    family="kernel",
    fix="zero gradient is the correct derivative here; if you need a signal through it, use a "
    "straight-through estimator (a @wp.func_grad passing the adjoint through) or a smooth surrogate",
    doc=DOC_CUSTOM_GRAD,
)


def check(model: Model) -> list[Finding]:
    findings = []
    for use in kernel_uses(model):
        if not use.backpropagated:
            continue
        for function in use.source.differentiated_functions():
            for call in function.calls:
                if call.name not in STEPS + CASTS or not call.arg_names or not call.result_used:
                    continue
                args = use.carries(function, call.arg_names[0])
                if not args:
                    continue
                what = "an integer cast" if call.name in CASTS else "piecewise constant"
                message = (
                    f"`{call.func}({', '.join(call.args)})` is {what}: its derivative is zero almost everywhere, "
                    f"so no gradient flows back through it (correct, not a bug); {evidence_phrase(model, use, args)}"
                )
                findings.append(
                    source_finding(model, WT408, Severity.INFO, use, function, call.line, message, "call")
                )
            for comparison in function.comparisons:
                if not comparison.as_value:
                    continue
                args = use.carries(function, comparison.names)
                if not args:
                    continue
                message = (
                    f"`{comparison.text}` is turned into a number: a comparison is piecewise constant, so no gradient "
                    f"flows back through it (correct, not a bug); {evidence_phrase(model, use, args)}"
                )
                findings.append(
                    source_finding(
                        model, WT408, Severity.INFO, use, function, comparison.line, message, "comparison"
                    )
                )
    return strongest(findings)


RULE = Rule((WT408,), check)
