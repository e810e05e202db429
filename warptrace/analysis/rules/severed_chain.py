"""An array without a gradient on the path from a parameter to the loss (WT301).

WT301 severed-chain
    Summary: an array without `requires_grad` on the taped path from a parameter to the loss
    Severity: error
    Proves:
        A recorded launch reads an array that has a gradient and writes a floating-point array
        *without* ``.grad``, and a later recorded launch reads that array on the way to the
        loss. Every parameter upstream gets no gradient through it (exactly zero when that is
        the only path). Reported at the array's allocation, naming the parameters that lose
        their gradient.
    Mechanism:
        An array allocated with ``requires_grad=False`` (the default of ``wp.zeros``,
        ``wp.empty``, ``wp.array``; ``empty_like``/``zeros_like``/``clone`` inherit the flag
        from their source) gets a NULL adjoint: the adjoint of the launch that reads it has
        nowhere to write, and the gradient silently stops there while everything downstream
        trains.
    Evidence:
        The arrays table (``requires_grad`` as the run left it, with ``set_requires_grad``
        events), the producing and consuming launches' access rows on a backpropagated tape,
        and the dataflow from the parameters through the array to the array the backward is
        seeded on.
    Example: wt301_zeros
    Fix:
        Allocate the array with ``requires_grad=True`` (``wp.zeros(..., requires_grad=True)``,
        ``wp.empty_like(x, requires_grad=True)``).
    Silent on:
        Arrays that are genuinely constant: targets, masks, index arrays, anything no parameter
        influences.
    Look-alikes: ok_flow_constant_inputs
    Warp documentation:
        "Differentiability", section "Debugging Gradients".

Findings are grouped by root cause (the user line to change) with a count.
"""

from __future__ import annotations

import numpy as np

from warptrace.analysis.dataflow import BackwardCall, Dataflow, Epoch, dataflow_of
from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import K, Model
from warptrace.analysis.rules.common import (
    DOC_DEBUG,
    Rule,
    array_label,
    backpropagated,
    differentiable_dtype,
    differentiable_reads,
    finding,
    join_names,
)
from warptrace.trace import schema as S

WT301 = RuleInfo(
    code="WT301",
    name="severed-chain",
    family="flow",
    fix="allocate the array with requires_grad=True (wp.zeros(..., requires_grad=True), "
    "wp.empty_like(x, requires_grad=True))",
    doc=DOC_DEBUG,
)


def check(model: Model) -> list[Finding]:
    df = dataflow_of(model)
    findings = []
    # the objective events (sorted) of each backpropagated epoch, and the reads they make of arrays
    # that may lack a gradient at the backward: rows that cannot (no such array, a gradient buffer,
    # an integer dtype, an array that has a gradient then) are dropped in numpy
    pairs = backpropagated(df)
    slices = df.objective_arrays_many([call for _, call in pairs])
    work = [(epoch, call, events) for (epoch, call), events in zip(pairs, slices)]
    consumers = np.concatenate([np.zeros(0, dtype=np.int64), *slices])
    whens = np.repeat(
        np.array([call.begin_seq for _, call, _ in work], dtype=np.int64), [len(evs) for _, _, evs in work]
    )
    rows, index = df.rows_of_events(consumers)
    keep = _may_lack_grad(model, df, rows, whens[index])
    rows, index = rows[keep], index[keep]
    # the producers each row may blame: certain writers in the consuming call's epoch (or an
    # unrecorded copy inside its tape's scope); rows without one cannot be reported
    call_of = np.repeat(np.arange(len(work)), [len(evs) for _, _, evs in work])[index]
    writer_rows, edge_of = df.writer_rows_many(rows)
    producers = df.acc_ev[writer_rows]
    epochs = [epoch for epoch, _, _ in work]
    blamed = ~df.is_uncertain[writer_rows] & _in_scope(model, df, producers, epochs, call_of[edge_of])
    edge_of, producers = edge_of[blamed], producers[blamed]
    blamed_rows = np.unique(edge_of)
    rows, index = rows[blamed_rows], index[blamed_rows]
    producer_cut = [*np.searchsorted(edge_of, blamed_rows, side="left").tolist(), len(edge_of)]
    producer_list = producers.tolist()
    consumed = consumers[index].tolist()
    rows = rows.tolist()
    cuts = np.searchsorted(index, np.cumsum([len(evs) for _, _, evs in work]), side="left").tolist()
    start = 0
    for (_, call, _), stop in zip(work, cuts):
        when = call.begin_seq
        reported: set[int] = set()
        # producer write rows of arrays without grad, consumed by an objective event
        for k in range(start, stop):
            consumer, row = consumed[k], rows[k]
            array_id = int(model.acc_array[row])
            info = model.arrays.get(array_id)
            if (
                info is None
                or array_id in reported
                or df.has_grad(array_id, when)
                or not differentiable_dtype(info.dtype)
            ):
                continue
            for producer in producer_list[producer_cut[k] : producer_cut[k + 1]]:
                sources = differentiable_reads(model, df, producer, when)
                if not sources:
                    continue
                leaves = df.provenance.get(producer, frozenset())
                findings.append(_severed(model, df, array_id, producer, consumer, call, sources, leaves))
                reported.add(array_id)
                break
        start = stop
    return findings


def _may_lack_grad(model: Model, df: Dataflow, rows: np.ndarray, whens: np.ndarray) -> np.ndarray:
    """Per access row of ``rows``: whether WT301 looks at it at seq ``whens[i]``: a read, not of a
    gradient buffer, of a known array with a floating-point dtype that may lack a gradient then
    (:meth:`Dataflow.has_grad` is not true at every seq from then on)."""
    never = np.iinfo(np.int64).max
    ids = [array_id for array_id in model.arrays if array_id >= 0]
    max_id = max(ids, default=-1)
    # per array id (last slot: ids out of range): the seq from which it always has a gradient,
    # int64 min where WT301 never looks at it: one comparison per row with the row's seq
    limit = np.full(max_id + 2, np.iinfo(np.int64).min, dtype=np.int64)
    for array_id in ids:
        if differentiable_dtype(model.arrays[array_id].dtype):
            limit[array_id] = df.grad_since(array_id, never)
    array_ids = model.acc_array[rows]
    slots = np.minimum(array_ids.view(np.uint64), max_id + 1)  # negative ids too: the last slot
    mask = whens < limit[slots]
    if len(ids) < len(model.arrays):  # negative array ids: left to the exact test
        mask |= array_ids < 0
    mask &= df.is_read[rows]
    mask &= ~df.grad_row_mask[rows]
    return mask


def _in_scope(
    model: Model, df: Dataflow, evs: np.ndarray, epochs: list[Epoch], epoch_of: np.ndarray
) -> np.ndarray:
    """Per event of ``evs``: whether it belongs to epoch ``epochs[epoch_of[i]]``, or is a copy
    inside that tape's scope that was not recorded (its destination has no grad)."""
    uid = np.array([epoch.uid for epoch in epochs], dtype=np.int64)[epoch_of]
    tape = np.array([epoch.tape for epoch in epochs], dtype=np.int64)[epoch_of]
    never = np.iinfo(np.int64).max
    first = np.array([model.seq[e.events[0]] if e.events else never for e in epochs], dtype=np.int64)[
        epoch_of
    ]
    last = np.array([model.seq[e.events[-1]] if e.events else -1 for e in epochs], dtype=np.int64)[epoch_of]
    seq = model.seq[evs]
    tape_copy = (
        (model.kind[evs] == K[S.COPY])
        & (model.tape[evs] == tape)
        & (model.phase[evs] == S.FORWARD)
        & (model.parent[evs] < 0)
        & (first <= seq)
        & (seq <= last)
    )
    return (df.ev_epoch[evs] == uid) | tape_copy


def _severed(
    model: Model,
    df: Dataflow,
    array_id: int,
    producer: int,
    consumer: int,
    call: BackwardCall,
    sources: list[int],
    leaves: frozenset[int],
) -> Finding:
    label = array_label(model, array_id)
    site = model.allocation_site(array_id)
    location = model.location(site, "allocation")
    params = [array_label(model, leaf) for leaf in sorted(leaves)] or [array_label(model, s) for s in sources]
    what = "kernel `" + model.kernel_name(producer) + "`" if model.kind[producer] == K[S.LAUNCH] else "a copy"
    message = (
        f"`{label}` has no gradient (allocated without requires_grad) but carries {join_names(params)} from "
        f"{what} (line {model.event_location(producer).line}) to `{model.kernel_name(consumer)}` "
        f"(line {model.event_location(consumer).line}) on the way to the loss: the adjoint stops there, "
        f"so {join_names(params)} {'gets' if len(set(params)) == 1 else 'get'} no gradient through it"
    )
    return finding(
        WT301,
        Severity.ERROR,
        message,
        location,
        related=[
            model.event_location(producer, "write"),
            model.event_location(consumer, "read"),
            model.location(call.site, "backward"),
        ],
        evidence={
            "first_seq": int(model.seq[producer]),
            "array_id": array_id,
            "producer_seq": int(model.seq[producer]),
            "consumer_seq": int(model.seq[consumer]),
            "parameters": sorted(int(p) for p in leaves),
        },
        key=(site if site >= 0 else label,),
    )


RULE = Rule((WT301,), check)
