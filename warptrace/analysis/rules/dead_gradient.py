"""A parameter the loss depends on whose gradient no adjoint reached (WT503).

WT503 dead-gradient
    Summary: a parameter the loss depends on whose gradient no adjoint reached
    Severity: error (traces recorded with ``--check-numerics`` only)
    Proves:
        After a ``tape.backward``, a leaf of the tape (an array with ``requires_grad`` whose
        values reach the loss through the recorded launches and copies) ends with a gradient
        that is exactly zero everywhere, *and* no gradient arrived: every event of that backward
        that wrote its gradient buffer read no incoming gradient, or only exactly-zero ones.
        The finding names the cut: the WT301 array without a gradient that explains it, or the
        unrecorded copy that carried the values.
    Mechanism:
        The gradient is dead, not small: the loss depends on the parameter, but the chain of
        adjoints never reaches it (an array without ``requires_grad``, a copy into a buffer
        without a gradient, a launch outside the tape).
    Evidence:
        The ``numerics`` table's gradient summaries after each backward (exact-zero counts) and
        the summaries of the incoming gradients the adjoint events read, with the dataflow from
        the leaf to the loss.
    Example: wt503_copy_severed
    Fix:
        Find where the chain is cut (the related lines): allocate the array with
        ``requires_grad=True``, copy into a buffer with a gradient, launch inside the tape.
    Silent on:
        A gradient that is zero because the math says so (a ReLU in its flat region, a
        parameter multiplied by a zero input): there a non-zero incoming gradient reaches the
        adjoint, which computes zero. Without ``--check-numerics`` the rule is silent.
    Look-alikes: ok_num_zero_grad
    Warp documentation:
        "Differentiability", section "Debugging Gradients".
"""

from __future__ import annotations

import numpy as np

from warptrace.analysis.dataflow import BackwardCall, Dataflow, dataflow_of
from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import K, Model
from warptrace.analysis.numerics import NumericsTable, numerics_of
from warptrace.analysis.rules import severed_chain
from warptrace.analysis.rules.common import DOC_DEBUG, Rule, access_rows, finding, memory_key, quote, shared
from warptrace.trace import schema as S

WT503 = RuleInfo(
    code="WT503",
    name="dead-gradient",
    family="numeric",
    fix="reconnect the chain where it is cut: allocate the intermediate array with requires_grad=True, "
    "or compute it with a recorded launch instead of copying into a buffer without a gradient",
    doc=DOC_DEBUG,
)


def check(model: Model) -> list[Finding]:
    table = numerics_of(model)
    if table is None:
        return []
    df = dataflow_of(model)
    calls = {call.end_seq: call for call in df.backward_calls}
    findings = []
    for row in table.of_kind(S.NUM_LEAF_GRAD):
        call = calls.get(row.seq)
        if call is None or not row.all_zero or row.nonfinite or row.owner < 0:
            continue
        leaf = df.root_array(row.owner)
        if not _reaches_loss(df, call, leaf):
            continue
        if _delivered(model, table, row.array_id, call):
            continue
        findings.append(_dead(model, df, call, leaf, row.array_id))
    return findings


def _reaches_loss(df: Dataflow, call: BackwardCall, leaf: int) -> bool:
    provenance = df.provenance
    return any(leaf in provenance.get(ev, ()) for ev in df.objective_events(call))


def _delivered(model: Model, table: NumericsTable, grad_id: int, call: BackwardCall) -> bool:
    """Whether an event of the backward call wrote the gradient buffer from a gradient that
    arrived: an adjoint launch (or copy) whose incoming gradients exist and are not all zero."""
    alloc, lo, hi = memory_key(model, grad_id)
    start = int(np.searchsorted(model.acc_seq, call.begin_seq, side="left"))
    stop = int(np.searchsorted(model.acc_seq, call.end_seq, side="right"))
    writers = set()
    for row in range(start, stop):
        if not model.acc_role[row] & S.ROLE_WRITE:
            continue
        other = int(model.acc_array[row])
        o_alloc, o_lo, o_hi = memory_key(model, other)
        if other == grad_id or (alloc >= 0 and o_alloc == alloc and o_lo < hi and lo < o_hi):
            writers.add(int(model.acc_ev[row]))
    return any(_carries_gradient(model, table, ev, grad_id) for ev in sorted(writers) if ev >= 0)


def _carries_gradient(model: Model, table: NumericsTable, ev: int, grad_id: int) -> bool:
    """The event read a gradient that is not known to be exactly zero (other than ``grad_id``),
    or, an adjoint launch, consumed one: a gradient buffer it wrote held a non-zero gradient
    before and exactly zero after (the adjoint of a store reads the output gradient, then
    clears it). The second is evidence the values give where the kernel analysis took an
    output for an input (a store through a local copy of a struct: ``State(out.x, out.v)``)."""
    seq = int(model.seq[ev])
    if model.kind[ev] != K[S.LAUNCH]:
        sources = [
            int(model.acc_array[r]) for r in access_rows(model, ev) if model.acc_role[r] == S.ROLE_READ
        ]
    else:
        sources = [
            int(model.acc_array[r])
            for r in access_rows(model, ev)
            if model.acc_flags[r] & S.FLAG_GRAD and model.acc_role[r] & S.ROLE_READ
        ]
    for array_id in sources:
        if array_id == grad_id:
            continue
        before = table.before(array_id, seq)
        if before is None or not before.all_zero:
            return True
    if model.kind[ev] == K[S.LAUNCH] and model.adjoint[ev]:
        after = {row.array_id: row for row in table.by_seq.get(seq, []) if row.what == S.NUM_WRITE}
        for r in access_rows(model, ev):
            array_id = int(model.acc_array[r])
            if (
                array_id == grad_id
                or not model.acc_flags[r] & S.FLAG_GRAD
                or not model.acc_role[r] & S.ROLE_WRITE
            ):
                continue
            before, now = table.before(array_id, seq), after.get(array_id)
            if before is not None and not before.all_zero and now is not None and now.all_zero:
                return True
    return False


def _unrecorded_copy(model: Model, df: Dataflow, leaf: int) -> int | None:
    """An unrecorded copy inside a tape's scope that carries the leaf's values (the cut)."""
    for ev, leaves in sorted(df.provenance.items()):
        if model.kind[ev] == K[S.COPY] and not model.recorded[ev] and leaf in leaves:
            return ev
    return None


def _dead(model: Model, df: Dataflow, call: BackwardCall, leaf: int, grad_id: int) -> Finding:
    label = model.array_label(leaf)
    causes = [
        f
        for f in shared(model, "WT301 findings", severed_chain.check)
        if leaf in f.evidence.get("parameters", ()) and int(f.evidence.get("first_seq", -1)) < call.begin_seq
    ]
    backward = model.location(call.site, "backward")
    related = [backward]
    if causes:
        cause = causes[-1]
        related.insert(0, cause.location)
        cut = model.array_label(int(cause.evidence.get("array_id", -1)))
        why = f"; the chain is cut at {quote(cut)}, allocated without a gradient at line {cause.location.line} (WT301)"
    elif (copy := _unrecorded_copy(model, df, leaf)) is not None:
        where = model.event_location(copy, "copy")
        related.insert(0, where)
        dest = [int(model.acc_array[r]) for r in access_rows(model, copy) if model.acc_role[r] & S.ROLE_WRITE]
        target = quote(model.array_label(dest[0])) if dest else "a buffer"
        why = (
            f"; the copy at line {where.line} into {target}, which has no gradient, is not recorded on the "
            "tape, so the backward stops there"
        )
    else:
        why = "; no adjoint of the recorded graph reaches it (look for a copy or launch outside the tape)"
    message = (
        f"after the backward at line {backward.line}, the gradient of {quote(label)} is exactly zero everywhere "
        f"and no gradient reached it, although the loss depends on {quote(label)} through the recorded "
        f"graph: the gradient is dead, not small{why}"
    )
    site = model.allocation_site(leaf)
    return finding(
        WT503,
        Severity.ERROR,
        message,
        model.location(site, "parameter"),
        related=related,
        evidence={
            "first_seq": call.end_seq,
            "array_id": leaf,
            "grad_id": grad_id,
            "backward_seq": call.begin_seq,
            "cause": causes[-1].code if causes else None,
        },
        key=(site if site >= 0 else label,),
    )


RULE = Rule((WT503,), check)
