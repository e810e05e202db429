"""WT401 inplace-mul-div (error).

An array element updated in place with a non-additive operator (``a[i] *= s``,
``a[i] /= s``, ``state.q[i] **= 2``) in a kernel recorded on a tape that is
backpropagated. Warp lowers ``+=``/``-=`` on an array element to an atomic, whose adjoint
is exact; every other in-place operator becomes a load, the operation and a store of the
same element, and the adjoint reads the element after the store: the gradient of the
factor and of the old value are computed from the new value (verified on Warp 1.19:
``a[i] *= s`` gives ``d loss / d s`` twice too large for ``loss = sum(a * s)**2``). Warp
only mentions it at debug log level ("in-place op ... is not differentiable").

Severity from the trace: ``error`` when the kernel runs on the backward slice of a
backpropagated tape and the updated array or the factor carries a gradient; ``info``
when the kernel is recorded on a tape but no gradient flows through the update; silent
outside tapes (an untaped optimizer step ``w[i] *= decay`` is fine).
Fix: write the result to a separate output array (``out[i] = a[i] * s``).

Warp documentation: "Differentiability" ("Array Overwrites", "Limitations and Workarounds").
"""

from __future__ import annotations

from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import Model
from warptrace.analysis.rules.common import DOC_OVERWRITES, Rule
from warptrace.analysis.rules.kernel_uses import evidence_phrase, kernel_uses, source_finding, strongest

WT401 = RuleInfo(
    code="WT401",
    name="inplace-mul-div",
    family="kernel",
    fix="write the product/quotient to a separate output array (out[i] = a[i] * s) instead of "
    "updating the element in place; only += and -= on array elements are differentiable",
    doc=DOC_OVERWRITES,
)

ADDITIVE = ("+=", "-=", "&=", "|=", "^=")  # atomics (bitwise ones act on integers)


def check(model: Model) -> list[Finding]:
    findings = []
    for use in kernel_uses(model):
        if not use.taped:
            continue
        for function in use.source.differentiated_functions():
            for aug in function.aug_assigns:
                if aug.target_kind != "array" or aug.op in ADDITIVE:
                    continue
                args = use.carries(function, aug.names)
                severity = Severity.ERROR if args else Severity.INFO
                message = (
                    f"`{aug.target} {aug.op} {aug.value}` updates an array element in place with a "
                    "non-additive operator: Warp's adjoint reads the element after the store, so the "
                    f"gradients of the old value and of the factor are wrong; {evidence_phrase(model, use, args)}"
                )
                findings.append(
                    source_finding(
                        model, WT401, severity, use, function, aug.line, message, "in-place update"
                    )
                )
    return strongest(findings)


RULE = Rule((WT401,), check)
