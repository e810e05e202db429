"""A gradient read when the buffer does not hold the current gradient (WT306).

WT306 stale-grad-read
    Summary: a `.grad` read before the backward that fills it, or after zeroing
    Severity: error (warning when the update does not visibly use the read)
    Proves:
        The values of a ``.grad`` buffer are read (``numpy()``, ``list()``, a copy) when the
        buffer does not hold the current gradient: after it was zeroed, or before any backward
        since the parameters last changed; the parameters are then updated without a fresh
        read. The optimizer consumes zeros or the previous iterate's gradient (a one-step
        delay, which destabilizes plain gradient descent).
    Mechanism:
        ``.grad`` is plain memory: reading it returns whatever the last backward (or zeroing)
        left there, with no check that it belongs to the current parameters.
    Evidence:
        A value read or copy of a gradient allocation, then the ``backward`` (or memset) that
        fills (or clears) it, then the parameter update, in event order.
    Example: wt306_delayed
    Fix:
        Read the gradient after this iteration's ``tape.backward()`` and zero it only after the
        update.
    Silent on:
        A gradient projected or clipped in place before it is read and used; an optimizer that
        reads the gradient after the backward.
    Look-alikes: ok_flow_grad_projection, ok_mem_optimizer
    Warp documentation:
        "Differentiability", section "Debugging Gradients"; ``Tape.backward``.

Findings are grouped by root cause (the user line to change) with a count.
"""

from __future__ import annotations

import numpy as np

from warptrace.analysis.dataflow import Dataflow, dataflow_of
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

WT306 = RuleInfo(
    code="WT306",
    name="stale-grad-read",
    family="flow",
    fix="read the gradient after this iteration's tape.backward(), and zero it only after the "
    "parameter update",
    doc=DOC_DEBUG,
)


def check(model: Model) -> list[Finding]:
    df = dataflow_of(model)
    findings = []
    grad_rows = np.nonzero(df.grad_row_mask & df.is_read)[0]  # then the phase of their events only
    grad_rows = grad_rows[model.phase[df.acc_ev[grad_rows]] == S.FORWARD]
    evs = df.acc_ev[grad_rows]
    kinds = model.kind[evs]
    reads = grad_rows[
        ((kinds == K[S.VALUE_READ]) | (kinds == K[S.COPY]))
        & (df.ev_backward[evs] < 0)
        & (model.parent[evs] < 0)
    ]
    for row in reads.tolist():
        ev = int(df.acc_ev[row])
        seq = int(model.seq[ev])
        grad_id = int(model.acc_array[row])
        owner = df.owner_of(grad_id)
        if owner < 0:
            continue
        before = df.fills_before(grad_id, seq)
        since = df.backward_calls[before[-1]].end_seq if before else -1
        zeroed = df.zeroed_between(grad_id, since, seq)
        updated = _first_update(model, df, owner, since, seq) >= 0
        if before and not zeroed and not updated:
            continue  # holds the gradient of the current parameters
        update = _first_update(model, df, owner, seq, None)
        if update < 0:
            continue
        update_seq = int(model.seq[update])
        if _fresh_read(model, df, grad_id, seq, update):
            continue
        uses = _update_uses(model, df, ev, update)
        severity = Severity.ERROR if uses else Severity.WARNING
        label = array_label(model, owner)
        filled = df.fills_before(grad_id, update_seq)
        after = [df.backward_calls[filled[len(before)]]] if len(filled) > len(before) else []
        if before and zeroed:
            state = "after it was zeroed, so it holds zeros"
        else:
            where = f" (line {model.location(after[0].site).line})" if after else ""
            state = f"before this iteration's backward{where} fills it, so it holds the previous iterate's gradient"
            state += " (zeros the first time)" if not before else ""
        message = (
            f"`{label}.grad` is read {state}; `{label}` is then updated (line "
            f"{model.event_location(update).line}) with no fresh read of its gradient: the optimizer "
            "steps with a stale gradient"
        )
        findings.append(
            finding(
                WT306,
                severity,
                message,
                model.event_location(ev, "read"),
                related=[model.event_location(update, "parameter update")]
                + ([model.location(after[0].site, "backward")] if after else []),
                evidence={
                    "first_seq": seq,
                    "read_seq": seq,
                    "update_seq": update_seq,
                    "grad_array_id": grad_id,
                },
                key=(int(model.site[ev]),),
            )
        )
    return findings


def _first_update(model: Model, df: Dataflow, owner: int, after_seq: int, before_seq: int | None) -> int:
    """First write to the owner's memory in the window made outside tape recording (an optimizer
    step, an assign), or -1."""
    for row in df.iter_writes(owner, after_seq, before_seq):
        ev = int(df.acc_ev[row])
        if (
            model.recorded[ev]
            or model.phase[ev] != S.FORWARD
            or model.parent[ev] >= 0
            or df.grad_row_mask[row]
        ):
            continue
        return ev
    return -1


def _fresh_read(model: Model, df: Dataflow, grad_id: int, seq: int, update: int) -> bool:
    """Whether the gradient is read again, holding a current gradient, before (or by) the update."""
    update_seq = int(model.seq[update])
    for row in df.iter_reads(grad_id, seq, update_seq + 1):
        ev = int(df.acc_ev[row])
        if model.phase[ev] != S.FORWARD or int(df.ev_backward[ev]) >= 0:
            continue
        read_seq = int(model.seq[ev])
        before = df.fills_before(grad_id, read_seq)
        if before and not df.zeroed_between(grad_id, df.backward_calls[before[-1]].end_seq, read_seq):
            return True
    return False


def _update_uses(model: Model, df: Dataflow, read_ev: int, update: int) -> bool:
    """Whether the update consumes the read: it reads what the read copied, or it writes values
    the host computed after the read (a copy from an array created after it)."""
    for row in access_rows(model, update):
        if not df.is_read[row]:
            continue
        for writer in df.writer_rows(row).tolist():
            if int(df.acc_ev[writer]) == read_ev:
                return True
        info = model.arrays.get(int(model.acc_array[row]))
        if (
            model.kind[update] == K[S.COPY]
            and info is not None
            and info.kind == S.ARRAY_EXTERNAL
            and info.seq >= int(model.seq[read_ev])
        ):
            return True
    return False


RULE = Rule((WT306,), check)
