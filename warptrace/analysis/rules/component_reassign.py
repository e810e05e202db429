"""WT402 component-reassign (error).

A component of a local vector, matrix or quaternion (``v[0] = ...``, ``v.x = ...``,
``m[i, j] = ...``) assigned a second time, or assigned after that component (or the
whole value) was read. Warp updates the local in place; the adjoint of the first
assignment or of the read sees the final component value, so the gradient of what was
assigned first, or read first, is wrong (verified on Warp 1.19, which compiles both
without a warning). An assignment repeated by a loop over a fixed component counts as
a second assignment. ``+=``/``-=`` on a component, and assigning each component once
(also ``v[k] = ...`` over the loop variable ``k``), are fine; exclusive ``if``/``else``
branches each assigning once are fine.

Severity: ``error`` when the local depends on a kernel argument that carries a gradient
on a backpropagated tape; ``info`` when the kernel is taped but no gradient flows
through the local; silent outside tapes.
Fix: build the value once (``v = wp.vec3(a, b, c)``), or assign a fresh local
(``w = v; w[0] = b``), or use ``+=`` for later updates.

Warp documentation: "Differentiability" ("Limitations and Workarounds").
"""

from __future__ import annotations

from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import Model
from warptrace.analysis.rules.common import DOC_LIMITS, Rule
from warptrace.analysis.rules.kernel_uses import evidence_phrase, kernel_uses, source_finding, strongest
from warptrace.kernel_source import FUNC_GRAD, FUNC_REPLAY

WT402 = RuleInfo(
    code="WT402",
    name="component-reassign",
    family="kernel",
    fix="construct the vector/matrix once with all its components, or copy it to a fresh local "
    "before changing a component; after one assignment only += and -= are safe",
    doc=DOC_LIMITS,
)


def check(model: Model) -> list[Finding]:
    findings = []
    for use in kernel_uses(model):
        if not use.taped:
            continue
        for function in use.source.all_functions:
            if function.role in (FUNC_GRAD, FUNC_REPLAY):
                continue
            for item in function.component_assigns:
                if item.op != "=" or not item.previous:
                    continue
                args = use.carries(function, [item.local])
                severity = Severity.ERROR if args else Severity.INFO
                if item.previous == "read":
                    what = f"after `{item.local}` was read on line {item.previous_line}"
                elif item.previous_line == item.line:
                    what = "once per iteration of the enclosing loop"
                else:
                    what = f"a second time (first on line {item.previous_line})"
                message = (
                    f"component `{item.local}{item.component}` of a local is assigned {what}: Warp's adjoint "
                    "sees only the final component value, so the gradient of the earlier value is wrong; "
                    f"{evidence_phrase(model, use, args)}"
                )
                findings.append(
                    source_finding(
                        model, WT402, severity, use, function, item.line, message, "component assignment"
                    )
                )
    return strongest(findings)


RULE = Rule((WT402,), check)
