"""A component of a local vector or matrix overwritten (WT402).

WT402 component-reassign
    Summary: a component of a local vector or matrix overwritten while it holds a computed value
    Severity: error when the overwritten value depends on a kernel argument that carries a
    gradient on a backpropagated tape; info when the kernel is taped but the overwritten value
    carries no gradient; silent outside tapes
    Proves:
        A component of a local vector, matrix or quaternion (``v[0] = ...``, ``v.x = ...``,
        ``m[i, j] = ...``) is overwritten while its previous value was computed from other
        values: assigned a second time, assigned again by each iteration of a loop, or
        overwriting what the local was initialized with (``p = x[i]; p[1] = 0.0``).
    Mechanism:
        Warp updates the local in place and does not clear the adjoint of the overwritten
        value, so the gradient of the new value also flows into the old one (verified on Warp
        1.19, which compiles all of these without a warning: ``p = x[i]; p[1] = 5.0;
        out = p[0] * p[1]`` gives ``d out / d x[i][1] = 2`` instead of 0; a ground clamp
        ``if p[1] < 0.0: p[1] = 0.0`` leaks the same way).
    Evidence:
        The kernel-source model (component assignments per local, what initialized the local,
        loops and branches around them), the launch on a backpropagated tape and the arguments
        carrying a gradient.
    Example: wt402_basis
    Fix:
        Build the value once (``p = wp.vec3(x[i][0], wp.max(x[i][1], 0.0), x[i][2])``), or
        construct a fresh vector instead of editing the component.
    Silent on:
        Assigning each component of a constant-initialized vector once (``v = wp.vec3(0.0);
        v[0] = a; v[1] = b``, also ``v[k] = ...`` over the loop variable); ``+=``/``-=`` on a
        component; exclusive ``if``/``else`` branches each assigning once; reading one component
        and assigning another; stores into locals bound to array views; rows of a tile assigned.
    Look-alikes: ok_src_array_view_store, ok_src_tile_slice_assign
    Warp documentation:
        "Differentiability", section "Limitations and Workarounds".
"""

from __future__ import annotations

from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import Model
from warptrace.analysis.rules.common import DOC_LIMITS, Rule
from warptrace.analysis.rules.kernel_uses import evidence_phrase, kernel_uses, source_finding, strongest

WT402 = RuleInfo(
    code="WT402",
    name="component-reassign",
    family="kernel",
    fix="construct the vector/matrix once with all its final components instead of overwriting "
    "a component that already holds a computed value; += and -= on a component are safe",
    doc=DOC_LIMITS,
)


def check(model: Model) -> list[Finding]:
    findings = []
    for use in kernel_uses(model):
        if not use.taped:
            continue
        for function in use.source.differentiated_functions():
            for item in function.component_assigns:
                if item.op != "=" or not item.previous:
                    continue
                args = use.carries(function, item.previous_names)
                severity = Severity.ERROR if args else Severity.INFO
                if item.previous_line == item.line:
                    what = "its value from the previous iteration of the enclosing loop"
                elif item.previous == "assigned":
                    what = f"the value assigned on line {item.previous_line}"
                else:
                    what = f"the value `{item.local}` was given on line {item.previous_line}"
                message = (
                    f"component `{item.local}{item.component}` of a local overwrites {what}: Warp does not clear "
                    "the adjoint of the overwritten value, so the gradient of the new value also flows into "
                    f"the old one; {evidence_phrase(model, use, args)}"
                )
                findings.append(
                    source_finding(
                        model, WT402, severity, use, function, item.line, message, "component assignment"
                    )
                )
    return strongest(findings)


RULE = Rule((WT402,), check)
