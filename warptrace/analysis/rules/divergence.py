"""The optimization blew up: growth across parameter updates until a value overflowed (WT505).

Maintainers: the growth is found in :mod:`warptrace.analysis.health` (steps with a loss,
gradient and parameter norms) and :mod:`warptrace.analysis.divergence` (a rollout with no
optimizer); the overflowing launch's inputs are judged by :mod:`warptrace.analysis.overflow`
(shared with WT501). The ``review`` hook names error findings before the first NaN as the
likely cause.

WT505 divergence
    Summary: the loss or the norms grew step after step until a value overflowed
    Severity: warning, never error (traces recorded with ``--check-numerics`` only)
    Proves:
        The loss (else the gradient norm, else the parameter norm) grew for several steps
        across parameter updates until a value overflowed to inf/NaN. Reported once, at the
        parameter update of the step where the growth began (else at the ``tape.backward`` of
        that step), with the health timeline as evidence: the loss, gradient and parameter
        norms where growth began and at the last finite step, and the first non-finite value
        with the magnitudes its launch read (an overflow of values that were already huge, not
        a domain error: the launch is innocent, see WT501). A simulation with no optimizer
        whose state grows along one launch line until it overflows (an unstable time step) is
        reported at that launch.
    Mechanism:
        Not a Warp mechanism: a divergence is a symptom. The cause is earlier than the NaN.
        When error findings precede it (a wrong gradient: WT203 accumulating unzeroed
        gradients, WT101 overwritten states, a truncated horizon, ...), the finding names them
        as the likely cause. When there are none, the gradient may well be right and the step
        size too large for the problem's curvature (a stiff system, ``lr`` above about 2/L):
        the finding says so, gives the ``gradcheck --at K`` command that checks the gradient
        at the step growth began, and, where the recorder kept the changes of small leaves,
        compares the step size the updates took with 2/L measured along the path
        (``L = |g_k - g_k-1| / |p_k - p_k-1|``).
    Evidence:
        The ``numerics`` table: per-step loss, gradient and parameter norms (the health
        timeline), the value summaries of every launch up to the first non-finite value, and
        for small leaves the change of values and gradient between backward calls.
    Example: wt505_stiff_spring
    Fix:
        Fix the error findings upstream first; with none, check the gradient with
        ``gradcheck --at K`` and, if it agrees, lower the step size (below 2/L), clip or
        normalize the update, or condition the problem better.
    Silent on:
        A stable descent; a NaN at the end of a healthy descent that a kernel made from moderate
        inputs (that is WT501's domain origin); a blow-up from ordinary values to overflow in
        one or two steps (too few points to call growth). Without ``--check-numerics`` the rule
        is silent.
    Look-alikes: wt505_stiff_spring_fixed, wt505_recurrence_fixed
    Warp documentation:
        "Differentiability", section "Debugging Gradients".
"""

from __future__ import annotations

import math
import os

from warptrace.analysis.command import gradcheck_command
from warptrace.analysis.divergence import Divergence, Rollout, rollout_of
from warptrace.analysis.findings import Finding, Location, RuleInfo, Severity
from warptrace.analysis.health import divergence_of
from warptrace.analysis.model import Model
from warptrace.analysis.numerics import numerics_of
from warptrace.analysis.rules.common import DOC_DEBUG, Rule, finding, quote
from warptrace.trace import schema as S

WT505 = RuleInfo(
    code="WT505",
    name="divergence",
    family="numeric",
    fix="fix the error findings upstream first; with none, check the gradient with gradcheck --at K and, "
    "if it agrees, lower the step size (below 2/L) or clip the update",
    doc=DOC_DEBUG,
)

# The consequence of a cause, not a cause: findings a divergence never names as its cause.
_NOT_CAUSES = ("WT501", "WT503", "WT505")
_NO_ERROR = "No error finding upstream"


def check(model: Model) -> list[Finding]:
    table = numerics_of(model)
    if table is None:
        return []
    found = divergence_of(model)
    if found is None:
        rollout = rollout_of(model, table)
        return [_rollout_finding(model, rollout)] if rollout is not None else []
    where = _location(model, found)
    related = [Location(found.backward["file"], found.backward["line"], "backward", found.backward["text"])]
    if found.first is not None and found.first.ev >= 0:
        related.append(model.event_location(found.first.ev, "first non-finite"))
    return [
        finding(
            WT505,
            Severity.WARNING,
            _story(model, found) + " " + _no_cause(model, found),
            where,
            related=related,
            evidence={
                "first_seq": found.start_seq,
                "start_step": found.start,
                "nonfinite_step": found.bad_step,
                "start_backward": found.start_backward,
                "first_nonfinite_seq": found.first.seq if found.first is not None else -1,
                "causes": [],
            },
            key=("divergence",),
        )
    ]


def _rollout_finding(model: Model, rollout: Rollout) -> Finding:
    """The same story inside one forward pass: a state grown along one line's launches."""
    first = rollout.first
    scale = first.scale
    assert scale is not None
    side = "the adjoint of " if model.adjoint[first.ev] else ""
    target = model.array_label(first.array_id, first.arg)
    message = (
        f"the state diverged along a rollout: {side}kernel {quote(model.kernel_name(first.ev))} wrote "
        f"{first.nonfinite} non-finite of {first.count} values into {quote(target)}, the first non-finite value "
        f"of the run on the way to the gradient, because {scale.describe()}: an overflow at the end of the "
        f"growth, not a domain error. {_NO_ERROR}: the code may be right and the recurrence unstable (a time "
        "step too large for the stiffest mode: explicit and symplectic Euler need omega * dt below 2; or a "
        "gain above 1 repeated over the horizon); use a smaller step or substeps, or a shorter horizon."
    )
    return finding(
        WT505,
        Severity.WARNING,
        message,
        model.event_location(first.ev, "launch"),
        evidence={
            "first_seq": first.seq,
            "first_nonfinite_seq": first.seq,
            "kernel": model.kernel_name(first.ev),
            "growth": scale.growth,
            "history": scale.history,
            "causes": [],
        },
        key=("divergence",),
    )


def review(findings: list[Finding]) -> list[Finding]:
    """Name the findings that precede the first non-finite value: errors as the likely cause;
    without any, warnings as a possible one (a gradient N times too large diverges like a step
    size N times too large), next to the step-size advice."""
    for item in findings:
        if item.code != WT505.code:
            continue
        bad_seq = int(item.evidence.get("first_nonfinite_seq", -1))
        before = sorted(
            (
                other
                for other in findings
                if other.severity >= Severity.WARNING
                and other.code not in _NOT_CAUSES
                and (bad_seq < 0 or int(other.evidence.get("first_seq", 0)) <= bad_seq)
            ),
            key=lambda f: int(f.evidence.get("first_seq", 0)),
        )
        unique: dict[tuple[str, str, int], Finding] = {}
        for other in before:  # review runs before findings merge: one per code and line
            unique.setdefault((other.code, other.location.file, other.location.line), other)
        before = list(unique.values())
        errors = [f for f in before if f.severity == Severity.ERROR]
        causes = errors or before
        if not causes:
            continue
        story, _, advice = item.message.partition(" " + _NO_ERROR)
        named = _named(causes)
        if errors:
            item.message = (
                f"{story} Likely cause: {named}: a wrong gradient drives the growth; fix "
                f"{'it' if len(errors) == 1 else 'them'} first, then look at the step size."
            )
        else:
            item.message = (
                f"{story} Possible cause: {named} (a gradient too large by a factor diverges like a step size "
                f"too large by that factor). {_NO_ERROR}{advice}"
            )
        item.evidence["causes"] = [f.code for f in causes]
        for cause in causes[:3]:
            loc = Location(
                cause.location.file, cause.location.line, f"cause ({cause.code})", cause.location.text
            )
            if loc not in item.related:
                item.related.append(loc)
    return findings


def _named(causes: list[Finding]) -> str:
    named = "; ".join(f"{f.code} ({f.name}) at {_short(f.location)}" for f in causes[:3])
    return named + (f" and {len(causes) - 3} more" if len(causes) > 3 else "")


def _story(model: Model, found: Divergence) -> str:
    """What grew, from where to where, and the first non-finite value."""
    span = found.last - found.start
    text = (
        f"the optimization diverged: the {found.quantity} grew from {_num(found.low)} at step {found.start} "
        f"to {_num(found.high)} at step {found.last} ({_factor(found)} over {span} step{'s' if span != 1 else ''}"
        f"{_updates(found)})"
    )
    others = []
    if found.quantity != "loss" and None not in found.losses:
        others.append(f"loss {_num(found.losses[0])} -> {_num(found.losses[1])}")
    if found.quantity != "gradient norm" and None not in found.grad_norms:
        others.append(f"gradient norm {_num(found.grad_norms[0])} -> {_num(found.grad_norms[1])}")
    if found.quantity != "parameter norm" and None not in found.param_norms:
        others.append(f"parameter norm {_num(found.param_norms[0])} -> {_num(found.param_norms[1])}")
    if others:
        text += f"; {', '.join(others)}"
    text += f". Step {found.bad_step} holds the first non-finite value"
    first = found.first
    if first is not None and first.ev >= 0 and first.what == S.NUM_WRITE:
        target = model.array_label(first.array_id, first.arg)
        if S.EVENT_KINDS[int(model.kind[first.ev])] == S.LAUNCH:
            side = "the adjoint of " if model.adjoint[first.ev] else ""
            line = model.event_location(first.ev).line
            text += (
                f": {side}kernel {quote(model.kernel_name(first.ev))} (line {line}) wrote {first.nonfinite} "
                f"non-finite of {first.count} values into {quote(target)}"
            )
            scale = first.scale
            if scale is not None and not scale.moderate:
                why = f"it read values up to {scale.largest:.3g}" if scale.huge else scale.describe()
                text += f" because {why}: an overflow at the end of the growth, not a domain error"
        else:
            text += f": {S.EVENT_KINDS[int(model.kind[first.ev])]} into {quote(target)}"
    return text + "."


def _no_cause(model: Model, found: Divergence) -> str:
    """The story when no error finding precedes it (replaced by :func:`review` otherwise)."""
    at = max(1, found.start_backward - 1) if found.start > 0 else found.start_backward
    text = f"{_NO_ERROR}: the gradient may be right and the step size too large for the problem's curvature"
    if found.curvature is not None:
        c = found.curvature
        text += (
            f" (the updates took a step size of {_num(c.step_size)}, above 2/L = {_num(c.limit)} from step "
            f"{c.start} on, L measured from successive gradients along the path)"
        )
    where = "at the step before growth began" if found.start > 0 else "where growth began"
    return (
        f"{text}. Check the gradient {where}: {gradcheck_command(model.meta, at)}; if it agrees, "
        "lower the step size."
    )


def _location(model: Model, found: Divergence) -> Location:
    if found.update_ev >= 0:
        return model.event_location(found.update_ev, "update")
    back = found.backward
    return Location(back["file"], back["line"], "backward", back["text"])


def _updates(found: Divergence) -> str:
    return f", the parameters updated {found.updates} times" if found.updates else ""


def _factor(found: Divergence) -> str:
    factor = found.factor
    return "x inf" if math.isinf(factor) else f"x{factor:.3g}"


def _num(value: float | None) -> str:
    return "?" if value is None else f"{value:.3g}"


def _short(loc: Location) -> str:
    return f"{os.path.basename(loc.file)}:{loc.line}"


RULE = Rule((WT505,), check, review)
