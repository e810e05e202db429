"""In-place non-additive update of an array element (WT401).

WT401 inplace-mul-div
    Summary: `a[i] *= s` or `a[i] /= s` on an array element in a taped kernel
    Severity: error when the kernel runs on the backward slice of a backpropagated tape and the
    updated array or the factor carries a gradient; info when the kernel is taped but no
    gradient flows through the update; silent outside tapes
    Proves:
        An array element updated in place with a non-additive operator (``a[i] *= s``,
        ``a[i] /= s``, ``state.q[i] **= 2``) in a kernel or ``@wp.func`` recorded on a tape that
        is backpropagated: the gradients of the factor and of the old value are computed from
        the new value.
    Mechanism:
        Warp lowers ``+=``/``-=`` on an array element to an atomic, whose adjoint is exact;
        every other in-place operator becomes a load, the operation and a store of the same
        element, and the adjoint reads the element after the store (verified on Warp 1.19:
        ``a[i] *= s`` gives ``d loss / d s`` twice too large for ``loss = sum(a * s)**2``). Warp
        only mentions it at debug log level ("in-place op ... is not differentiable").
    Evidence:
        The kernel-source model stored in the trace (the augmented assignment, its line in the
        kernel or ``@wp.func``), the launch on a backpropagated tape, and which arguments carry a
        gradient there (the finding names them and the launch).
    Example: wt401_gain
    Fix:
        Write the product or quotient to a separate output array (``out[i] = a[i] * s``); only
        ``+=`` and ``-=`` on array elements are differentiable.
    Silent on:
        In-place products outside the tape (an untaped optimizer step ``w[i] *= decay``) and on
        local variables; the body of a ``@wp.func`` that has a ``@wp.func_grad`` (Warp runs the
        custom adjoint instead).
    Look-alikes: ok_src_inplace_untaped, ok_src_custom_adjoint_loop
    Warp documentation:
        "Differentiability", sections "Array Overwrites" and "Limitations and Workarounds".
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
