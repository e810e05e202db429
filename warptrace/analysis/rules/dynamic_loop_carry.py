"""Non-additive state carried through a loop Warp does not unroll (WT403).

WT403 dynamic-loop-carry
    Summary: a product or recurrence carried across iterations of a loop Warp does not unroll
    Severity: error (warning for a value carried only by a branch condition, an argmin) when
    the carried local depends on a kernel argument that carries a gradient on a backpropagated
    tape; info when the kernel is taped but no gradient flows through it; silent outside tapes
    Proves:
        Non-additive state is carried from one iteration to the next of a loop that Warp does
        not unroll: a product (``p *= x[k]``), a recurrence (``y = wp.sin(y)``,
        ``s = s * a + b``), a value used as a condition or an index.
    Mechanism:
        Warp unrolls ``for k in range(...)`` only when the bounds are constants (literals or
        ``wp.constant``/module integers), there is no ``break`` and the trip count is at most the
        module option ``max_unroll`` (16 by default; any count when the body uses
        ``wp.static``). Every other loop (``range(n)`` with a runtime ``n``, ``while``, a
        constant range beyond ``max_unroll``) is dynamic: its adjoint does not keep each
        iteration's values, so the adjoint of a carried product or recurrence is wrong
        (verified on Warp 1.19: ``prod(x)`` over ``range(n)`` gives ``[54, 18, 3]`` for
        ``x = [1.5, 2, 3]`` instead of ``[6, 4.5, 3]``). A carried value read only by a branch
        condition (``if d < best: best = d; chosen = y``) makes the replay take the branches
        from the wrong value: the gradient goes to the wrong iteration.
    Evidence:
        The kernel-source model: loops with their bounds, ``break`` and ``wp.static`` use, the
        integer constants the bounds name and the kernel's ``max_unroll`` (all stored in the
        trace), and the assignments to locals inside and after each loop.
    Example: wt403_product
    Fix:
        Give the loop a compile-time trip count within ``max_unroll`` (or raise the module
        option ``max_unroll``), accumulate additively (in log space: ``s += wp.log(x[k])``), or
        keep each iteration's value in an array indexed by the iteration.
    Silent on:
        ``+=``/``-=`` accumulation (``s += x[k] * w[k]``); values computed fresh in each
        iteration (also when read after the loop); unrolled static loops; nested dynamic loops
        that only accumulate; a carried value only scaled by constants; a loop that stores into
        an array; loops inside a ``@wp.func`` that has a ``@wp.func_grad``.
    Look-alikes: ok_src_loops, ok_src_loop_constant_scale, ok_src_loop_array_store,
        ok_src_custom_adjoint_loop
    Warp documentation:
        "Differentiability", section "Limitations and Workarounds" (dynamic loops).
"""

from __future__ import annotations

from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import Model
from warptrace.analysis.rules.common import DOC_LIMITS, Rule
from warptrace.analysis.rules.kernel_uses import evidence_phrase, kernel_uses, source_finding, strongest
from warptrace.kernel_source import Loop

WT403 = RuleInfo(
    code="WT403",
    name="dynamic-loop-carry",
    family="kernel",
    fix="give the loop a compile-time trip count within max_unroll (or raise the module option "
    "max_unroll), accumulate additively (e.g. in log space), or keep each iteration's value in an array",
    doc=DOC_LIMITS,
)


def check(model: Model) -> list[Finding]:
    findings = []
    for use in kernel_uses(model):
        if not use.taped:
            continue
        for function in use.source.differentiated_functions():
            for loop in function.loops:
                if loop.unrolled or not loop.carried:
                    continue
                kinds = loop.carried_kinds or ("value",) * len(loop.carried)
                for name, line, kind in zip(loop.carried, loop.carried_lines, kinds):
                    args = use.carries(function, [name])
                    if not args:
                        severity = Severity.INFO
                    else:
                        severity = Severity.ERROR if kind == "value" else Severity.WARNING
                    if kind == "value":
                        how = (
                            "and is used non-additively here: the adjoint replays each iteration from its final "
                            "value, so the gradient through it is wrong"
                        )
                    else:
                        how = (
                            "and decides this branch: the replay takes the branch from its final value, so "
                            "the adjoints of the statements under it run for the wrong iterations (an argmin "
                            "search sends the gradient to the last candidate)"
                        )
                    message = (
                        f"`{name}` is carried from one iteration to the next of the loop on line {loop.line}, "
                        f"which Warp does not unroll ({_why_dynamic(loop)}), {how}; "
                        f"{evidence_phrase(model, use, args)}"
                    )
                    findings.append(
                        source_finding(
                            model, WT403, severity, use, function, line, message, "loop-carried use"
                        )
                    )
    return strongest(findings)


def _why_dynamic(loop: Loop) -> str:
    if loop.kind == "while":
        return "a while loop"
    if loop.trip_count is None:
        if not loop.bounds:
            return f"`{loop.iterator}` is not a range()"
        return f"the bounds of `{loop.iterator}` are not compile-time constants"
    return f"{loop.trip_count} iterations exceed max_unroll, or the body breaks out"


RULE = Rule((WT403,), check)
