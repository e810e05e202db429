"""A custom adjoint that disagrees with finite differences (WT502).

WT502 custom-adjoint-mismatch
    Summary: a `@wp.func_grad` that disagrees with finite differences of its function
    Severity: error (traces recorded with ``--check-numerics`` only)
    Proves:
        A custom adjoint (``@wp.func_grad``) reached by a recorded kernel disagrees with central
        finite differences of its forward function. Reported at the ``def`` of the custom
        adjoint, with the worst relative error, the inputs where it occurs, and the two
        derivatives.
    Mechanism:
        Warp trusts a custom adjoint completely; a wrong derivative (or ``=`` for ``+=``, which
        shows only when the same value reaches two arguments) gives a wrong gradient with no
        other symptom.
    Evidence:
        ``meta.json`` ``numerics``: at the end of the run (after the recorder is removed, so
        nothing of it is recorded and the program's random streams are untouched) each custom
        adjoint is evaluated in small generated test kernels on inputs drawn from the value
        ranges the kernels read, in float64 where the function is generic, including a case
        with the same value passed to two arguments; samples on a kink are skipped.
    Example: wt502_taylor_adjoint
    Fix:
        Correct the derivative; accumulate with ``+=`` into ``wp.adjoint[...]``.
    Silent on:
        A correct custom adjoint of a function with a kink (``abs``, ``max``, ``wp.where``).
        Without ``--check-numerics`` the rule is silent (WT404 still reads ``=`` from the source).
    Look-alikes: ok_num_kink_adjoint
    Warp documentation:
        "Differentiability", section "Custom Gradient Functions".
"""

from __future__ import annotations

import math
from typing import Any

from warptrace.analysis.findings import Finding, Location, RuleInfo, Severity
from warptrace.analysis.model import Model
from warptrace.analysis.numerics import adjoint_checks
from warptrace.analysis.rules.common import DOC_CUSTOM_GRAD, Rule, finding, quote

WT502 = RuleInfo(
    code="WT502",
    name="custom-adjoint-mismatch",
    family="numeric",
    fix="correct the derivative in the @wp.func_grad function and accumulate into wp.adjoint[...] with +=",
    doc=DOC_CUSTOM_GRAD,
)

# Relative error above which the adjoint is wrong, per precision of the check: float64
# central differences are good to ~1e-8 on smooth functions, float32 ones to ~1e-2.
THRESHOLD = {"float64": 1e-4, "float32": 5e-2}


def check(model: Model) -> list[Finding]:
    findings = []
    for entry in adjoint_checks(model):
        error = entry.get("worst_rel_error")
        precision = str(entry.get("precision") or "")
        if not isinstance(error, (int, float)) or math.isnan(error) or precision not in THRESHOLD:
            continue
        if error <= THRESHOLD[precision]:
            continue
        findings.append(_mismatch(entry, float(error), precision))
    return findings


def _mismatch(entry: dict[str, Any], error: float, precision: str) -> Finding:
    func = str(entry.get("func") or "?")
    where = Location(
        file=str(entry.get("grad_file") or entry.get("file") or "<unknown>"),
        line=int(entry.get("grad_line") or entry.get("line") or 0),
        role="custom adjoint",
        function=str(entry.get("grad_func") or ""),
    )
    inputs = ", ".join(f"{v:.6g}" for v in entry.get("worst_input") or [])
    case = " with the same value passed twice" if entry.get("worst_case") == "repeated" else ""
    message = (
        f"the custom adjoint of {quote(func)} disagrees with {precision} central finite differences of "
        f"{quote(func)}: relative error {error:.3g} in d/d{entry.get('worst_arg')} at ({inputs}){case} "
        f"(adjoint {entry.get('custom'):.6g}, finite differences {entry.get('finite_difference'):.6g}; "
        f"{entry.get('samples')} samples from the values the kernels read)"
    )
    related = []
    if entry.get("file") and entry.get("line"):
        related.append(Location(file=str(entry["file"]), line=int(entry["line"]), role="forward function"))
    return finding(
        WT502,
        Severity.ERROR,
        message,
        where,
        related=related,
        evidence={
            "func": func,
            "worst_rel_error": error,
            "precision": precision,
            "worst_case": entry.get("worst_case"),
            "worst_input": entry.get("worst_input"),
            "kernel_ids": entry.get("kernel_ids"),
        },
        key=(func, where.file, where.line),
    )


RULE = Rule((WT502,), check)
