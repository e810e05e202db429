"""sqrt, cbrt or a fractional pow at an argument that can be zero (WT407).

WT407 nonsmooth-point
    Summary: `sqrt`, `cbrt` or a fractional `pow` at an argument that can be zero: infinite adjoint
    Severity: warning when the argument depends on a kernel argument that carries a gradient on
    a backpropagated tape (the zero is a run-time event); silent otherwise
    Proves:
        ``wp.sqrt``, ``wp.cbrt`` or ``wp.pow`` with a fractional exponent is applied to an
        argument that can be zero, with no guard: the forward value is finite (``sqrt(0) = 0``)
        but the derivative is infinite, and the adjoint is NaN or inf. Typical: a distance
        ``wp.sqrt(wp.dot(d, d))`` between coincident points, the norm of a zero residual.
    Mechanism:
        Warp differentiates ``sqrt(x)`` as ``0.5 / sqrt(x)``, infinite at zero; multiplied by a
        zero incoming gradient it is NaN (verified on Warp 1.19: ``wp.sqrt(x * x)`` at ``x = 0``
        gives a NaN gradient). ``wp.length``, ``wp.normalize``, ``wp.acos`` and ``wp.asin`` are
        safe: Warp's own adjoints return zero at their singular points.
    Evidence:
        The kernel-source model: the call, its argument and everything that could keep the
        argument away from zero (``kernel_source.guards``: ``wp.max``, ``wp.clamp``, a sum with
        a positive constant or an epsilon parameter, an enclosing ``if`` or early ``return``
        testing it), the launch on a backpropagated tape and the arguments carrying a gradient.
    Example: wt407_springs
    Fix:
        ``wp.sqrt(wp.max(x, eps))``, ``wp.sqrt(x + eps)``, a branch that skips the zero case, or
        a ``@wp.func`` with a ``@wp.func_grad`` that defines the derivative there.
    Silent on:
        Guarded arguments (above); ``wp.length``/``wp.normalize``/``wp.acos``/``wp.asin``; a
        call inside a ``@wp.func`` that has a ``@wp.func_grad`` (Warp runs the custom adjoint,
        not the built-in derivatives of its body); ``pow`` with an integer exponent; a division
        by zero (its forward value is already non-finite: WT501 with ``--check-numerics``).
    Look-alikes: ok_src_guards, ok_src_custom_adjoint_sqrt
    Warp documentation:
        "Differentiability", sections "Debugging Gradients" and "Custom Gradient Functions".
"""

from __future__ import annotations

import re

from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import Model
from warptrace.analysis.rules.common import DOC_DEBUG, Rule
from warptrace.analysis.rules.kernel_uses import (
    ROOTS,
    evidence_phrase,
    kernel_uses,
    source_finding,
    strongest,
)
from warptrace.kernel_source import Call, FunctionFacts, KernelSource

WT407 = RuleInfo(
    code="WT407",
    name="nonsmooth-point",
    family="kernel",
    fix="keep the argument away from zero (wp.sqrt(wp.max(x, eps)), wp.sqrt(x + eps)), branch around "
    "the zero case, or give the function a @wp.func_grad",
    doc=DOC_DEBUG,
)


def check(model: Model) -> list[Finding]:
    findings = []
    for use in kernel_uses(model):
        if not use.backpropagated:
            continue
        source = use.source
        for function in source.differentiated_functions():
            for call in function.calls:
                if not _singular(call) or call.arg_guarded or not call.arg_names:
                    continue
                if _guarded(source, function, call) or _reported_as_select(function, call):
                    continue
                args = use.carries(function, call.arg_names[0])
                if not args:
                    continue
                message = (
                    f"`{call.func}({', '.join(call.args)})` has an infinite derivative where its argument is "
                    "zero, and nothing keeps the argument away from zero: the gradient becomes inf/NaN there "
                    f"while the forward value is finite; {evidence_phrase(model, use, args)}"
                )
                findings.append(
                    source_finding(model, WT407, Severity.WARNING, use, function, call.line, message, "call")
                )
    return strongest(findings)


def _singular(call: Call) -> bool:
    if call.name in ROOTS and len(call.args) == 1:
        return True
    if call.name == "pow" and len(call.args) == 2:
        try:
            exponent = float(call.args[1])
        except ValueError:
            return False
        return not exponent.is_integer() and exponent < 1.0
    return False


def _guarded(source: KernelSource, function: FunctionFacts, call: Call) -> bool:
    """A branch condition (enclosing ``if``, earlier early exit, conditional expression on the
    same line) tests the argument or a value it is computed from."""
    reached = source.closure(function, call.arg_names[0])
    if reached & set(call.guards):
        return True
    for select in function.selects:
        if select.kind == "ifexp" and select.line == call.line:
            words = set(re.findall(r"[A-Za-z_]\w*", select.condition))
            if words & reached:
                return True
    return False


def _reported_as_select(function: FunctionFacts, call: Call) -> bool:
    """The call sits in a ``wp.where``/``wp.select`` operand that WT406 reports."""
    return any(
        select.kind != "ifexp" and select.line == call.line and any(call.name in h for h in select.hazards)
        for select in function.selects
    )


RULE = Rule((WT407,), check)
