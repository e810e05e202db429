"""Non-additive state carried through a loop Warp does not unroll (WT403).

WT403 dynamic-loop-carry
    Summary: a value carried through, or read after, a loop Warp does not unroll, where an adjoint needs it
    Severity: error (warning for a value carried only by a branch condition, an argmin, or read
    after the loop only by a branch or a later loop's bounds) when the value depends on a kernel
    argument that carries a gradient on a backpropagated tape; info when the kernel is taped but
    no gradient flows through it; silent outside tapes
    Proves:
        Inside the loop: non-additive state is carried from one iteration to the next of a loop
        that Warp does not unroll: a product (``p *= x[k]``), a recurrence (``y = wp.sin(y)``,
        ``s = s * a + b``), a value used as a condition or an index. After the loop: a statement
        in the same kernel or ``@wp.func`` whose adjoint needs a local the loop changed (a
        product with something that carries a gradient, a division, ``sqrt(s)``,
        ``length(v)``, an index).
    Mechanism:
        Warp unrolls ``for k in range(...)`` only when the bounds are constants (literals or
        ``wp.constant``/module integers, ``wp.static``), there is no ``break`` and the trip
        count is at most the module option ``max_unroll`` (16 by default). Every other loop
        (``range(n)`` with a runtime ``n``, ``while``, a constant range beyond ``max_unroll``)
        is dynamic, and the adjoint's replay of the forward values skips it: the adjoint of a
        carried product or recurrence is wrong (verified on Warp 1.19: ``prod(x)`` over
        ``range(n)`` gives ``[54, 18, 3]`` for ``x = [1.5, 2, 3]`` instead of ``[6, 4.5, 3]``),
        a carried branch condition sends the gradient to the wrong iteration, and every local
        the loop changes holds its value from *before* the loop in the adjoint of every
        statement after it (``s = 1; for j in range(n): s += a[j]`` then ``out[0] = s * c[0]``
        gives ``c.grad = 1`` instead of the sum; ``s * s`` gives ``a.grad = 2`` instead of
        ``2 * sum``; ``total / norm`` gives NaN). Warp replays *calls*: a ``@wp.func`` that
        holds the loop and returns the raw accumulators gives its caller exact values.
    Evidence:
        The kernel-source model: loops with their bounds, ``break`` and ``wp.static`` use, the
        integer constants the bounds name and the kernel's ``max_unroll`` (all stored in the
        trace), the assignments to locals inside each loop, and the statements after a dynamic
        loop whose adjoint needs a value it changed (:mod:`warptrace.kernel_source.replay`).
    Example: wt403_product
    Fix:
        Give the loop a compile-time trip count within ``max_unroll`` (or raise the module
        option ``max_unroll``), accumulate additively (in log space: ``s += wp.log(x[k])``), or
        keep each iteration's value in an array indexed by the iteration; for a use after the
        loop, move the loop into a ``@wp.func`` that returns the raw accumulators and do the
        nonlinear computation in the caller (Warp's documented workaround).
    Silent on:
        ``+=``/``-=`` accumulation (``s += x[k] * w[k]``); values computed fresh in each
        iteration; uses after the loop that do not need the value (``out[i] = s``,
        ``return s``, ``s * 2.0``, a product with something that carries no gradient); the
        nonlinear use in the caller of a ``@wp.func`` that returns the raw accumulators;
        unrolled static loops; nested dynamic loops that only accumulate; a carried value only
        scaled by constants; a loop that stores into an array; loops inside a ``@wp.func`` that
        has a ``@wp.func_grad``; a loop under ``if arr:`` when ``arr`` is null at the launch.
        The rule reports the mechanism, not the numbers: a use Warp happens to get right for
        some values is reported all the same.
    Look-alikes: ok_src_loops, ok_src_loop_constant_scale, ok_src_loop_array_store,
        ok_src_custom_adjoint_loop, ok_src_after_loop_exact
    Warp documentation:
        "Differentiability", section "Limitations and Workarounds" (dynamic loops).
"""

from __future__ import annotations

from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import Model
from warptrace.analysis.rules.common import DOC_LIMITS, Rule, access_rows
from warptrace.analysis.rules.kernel_uses import (
    KernelUse,
    evidence_phrase,
    kernel_uses,
    source_finding,
    strongest,
)
from warptrace.kernel_source import FunctionFacts, Loop, StaleRead

WT403 = RuleInfo(
    code="WT403",
    name="dynamic-loop-carry",
    family="kernel",
    fix="give the loop a compile-time trip count within max_unroll (or raise the module option "
    "max_unroll), accumulate additively (e.g. in log space), or keep each iteration's value in an array; "
    "for a use after the loop, put the loop in a @wp.func that returns the raw accumulators and do the "
    "nonlinear computation in its caller (Warp replays calls, not loops)",
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
            loops = {loop.line: loop for loop in function.loops}
            arrays = {arg.name for arg in use.kernel.args if arg.is_array or arg.field}
            for read in function.stale_reads:
                if not use.source.kernel_args(function, read.needs) & arrays:
                    continue  # only scalars or constants: no gradient can depend on the stale value
                if _never_runs(model, use, function, read):
                    continue
                findings.append(_after_loop(model, use, function, read, loops.get(read.loop)))
    return strongest(findings)


def _after_loop(
    model: Model, use: KernelUse, function: FunctionFacts, read: StaleRead, loop: Loop | None
) -> Finding:
    args = use.carries(function, read.needs)
    if not args:
        severity = Severity.INFO
    else:
        severity = Severity.ERROR if read.kind == "value" else Severity.WARNING
    names = ", ".join(f"`{name}`" for name in read.names)
    verb = "is" if len(read.names) == 1 else "are"
    why = f" ({_why_dynamic(loop)})" if loop is not None else ""
    where = "kernel" if function is use.source.kernel else "function"
    if read.kind == "value":
        how = "and the adjoint of this statement needs that value"
    else:
        how = "and this condition (or loop bound) decides which adjoint statements run"
    evidence = evidence_phrase(model, use, args)
    partners = use.source.kernel_args(function, read.needs)
    if use.call is not None and use.grad_args and not args:
        # the kernel's gradient flows, but not through what this adjoint computes from the value
        carry = "carries" if len(partners) == 1 else "carry"
        evidence = (
            f"the adjoint that needs it computes the gradient of {_names(partners) or 'locals'}, which "
            f"{carry} no gradient at the launch on line {model.event_location(use.launch).line}"
        )
    message = (
        f"{names} {verb} changed by the loop on line {read.loop}, which Warp does not unroll{why}: "
        f"when the adjoint recomputes the {where}'s forward values it skips that loop, so here "
        f"{names} {verb} still at {'its' if len(read.names) == 1 else 'their'} value from before the loop, "
        f"{how}; {evidence}"
    )
    return source_finding(model, WT403, severity, use, function, read.line, message, "use after the loop")


def _names(names: frozenset[str]) -> str:
    return ", ".join(f"`{name}`" for name in sorted(names))


def _never_runs(model: Model, use: KernelUse, function: FunctionFacts, read: StaleRead) -> bool:
    """Whether the loop runs only under ``if arr:`` for arrays that are null at the launch (a
    null array argument has no access row)."""
    if not read.guards:
        return False
    args = use.source.kernel_args(function, read.guards)
    arrays = {arg.name for arg in use.kernel.args if arg.is_array and not arg.field}
    if not args or not args <= arrays:
        return False
    present = {str(model.acc_arg[row]) for row in access_rows(model, use.launch)}
    return not (args & present)


def _why_dynamic(loop: Loop) -> str:
    if loop.kind == "while":
        return "a while loop"
    if loop.trip_count is None:
        if not loop.bounds:
            return f"`{loop.iterator}` is not a range()"
        return f"the bounds of `{loop.iterator}` are not compile-time constants"
    return f"{loop.trip_count} iterations exceed max_unroll, or the body breaks out"


RULE = Rule((WT403,), check)
