"""WT304 manual-seed (warning).

``tape.backward()`` without ``loss=``, seeded by hand on an array of N > 1 elements
(``x.grad.fill_(1.0)``, ``assign``, or ``backward(grads={x: ones})``): the
gradient is that of the *sum* of the N elements, N times the gradient of their
mean. Right if the objective is the sum; wrong by exactly N if it is the mean.
Fix: reduce to a scalar loss on the tape (with the 1/N of a mean) and call
``tape.backward(loss)``.

Warp documentation: "Differentiability" (sections "Debugging Gradients", "Limitations
and Workarounds", "Custom Gradient Functions"/"Custom Replay Functions") and
``Tape.backward``.

Findings are grouped by root cause (the user line to change) with a count.
"""

from __future__ import annotations

import numpy as np

from warptrace.analysis.dataflow import BackwardCall, Dataflow, dataflow_of
from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import K, Model
from warptrace.analysis.rules.common import (
    DOC_DEBUG,
    Rule,
    access_rows,
    array_label,
    finding,
)
from warptrace.trace import schema as S

WT304 = RuleInfo(
    code="WT304",
    name="manual-seed",
    family="flow",
    fix="reduce to a scalar loss on the tape (with the 1/N of a mean) and call tape.backward(loss)",
    doc="Tape.backward; " + DOC_DEBUG,
)


def check(model: Model) -> list[Finding]:
    df = dataflow_of(model)
    findings = []
    for call in df.backward_calls:
        if call.loss >= 0:
            continue
        for ev, _grad_id, owner, from_grad in df.seeds(call):
            if from_grad:
                continue  # an adjoint handed over from another backward (checkpointing), not a seed
            if _external_source(model, df, ev, call):
                continue  # an upstream gradient from framework memory (e.g. a PyTorch grad_output)
            info = model.arrays.get(int(owner))
            size = info.size if info else 0
            if size <= 1:
                continue
            by_grads = ev == call.begin_ev
            value = model.value[ev] if model.kind[ev] == K[S.MEMSET] else np.nan
            if not np.isnan(value) and abs(value * size - 1.0) < 1e-6:
                continue  # seeded with 1/N: the mean
            label = array_label(model, owner)
            how = (
                f"`grads={{{label}: ...}}`"
                if by_grads
                else (
                    f"`{label}.grad.fill_({value:g})`"
                    if not np.isnan(value)
                    else f"a write into `{label}.grad`"
                )
            )
            message = (
                f"backward without loss= seeded by hand with {how} on {size} elements: the gradient is that of "
                f"the SUM of `{label}`, {size}x the gradient of their mean; if the objective you report or "
                f"minimize is the mean, every gradient is {size}x too large"
            )
            location = model.location(call.site, "backward") if by_grads else model.event_location(ev, "seed")
            related = [] if by_grads else [model.location(call.site, "backward")]
            findings.append(
                finding(
                    WT304,
                    Severity.WARNING,
                    message,
                    location,
                    related=related,
                    evidence={"first_seq": int(model.seq[ev]), "array_id": int(owner), "size": int(size)},
                    key=(location.file, location.line),
                )
            )
    return findings


def _external_source(model: Model, df: Dataflow, ev: int, call: BackwardCall) -> bool:
    """Whether a seed copies from zero-copy framework memory (for ``grads=``: the assign inside
    the backward)."""
    events = [ev]
    if ev == call.begin_ev:
        events = [
            e
            for e in range(call.begin_ev + 1, min(call.end_ev, model.n_events))
            if model.kind[e] == K[S.COPY]
        ]
    for e in events:
        for row in access_rows(model, e):
            info = model.arrays.get(int(model.acc_array[row]))
            if df.is_read[row] and info is not None and info.kind == S.ARRAY_EXTERNAL:
                return True
    return False


RULE = Rule((WT304,), check)
