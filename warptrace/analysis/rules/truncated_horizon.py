"""WT302 truncated-horizon (error).

State written on one tape by launches that depend on parameters is read on a later
tape; each tape is backpropagated on its own (the earlier one first) and the
parameters' ``.grad`` is not zeroed between the two backward calls, so the
gradients are summed. The later tape treats the carried state as a constant: every
path by which the parameters act on later windows through that state is dropped.
Deliberate truncated backpropagation through time does exactly this; the finding
says what is dropped.
Fix: one tape over the whole horizon, ``steps + 1`` distinct state buffers and
per-step intermediates, one backward (checkpoint if memory is the issue).

Warp documentation: "Differentiability" (sections "Debugging Gradients", "Limitations
and Workarounds", "Custom Gradient Functions"/"Custom Replay Functions") and
``Tape.backward``.

Findings are grouped by root cause (the user line to change) with a count.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from warptrace.analysis.dataflow import dataflow_of
from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import Model
from warptrace.analysis.rules.common import (
    DOC_LIMITS,
    Rule,
    array_label,
    finding,
    grad_cleared,
    join_names,
)

WT302 = RuleInfo(
    code="WT302",
    name="truncated-horizon",
    family="flow",
    fix="record the whole horizon on one tape with steps + 1 distinct state buffers and per-step "
    "intermediates, and call backward once (use checkpointing if memory is the issue)",
    doc=DOC_LIMITS,
)


def check(model: Model) -> list[Finding]:
    df = dataflow_of(model)
    if len(df.backward_calls) < 2:
        return []
    # def-use edges from a recorded event of one epoch to a recorded event of another
    reader_epoch = df.ev_epoch[df.edge_reader_ev]
    writer_epoch = df.ev_epoch[df.edge_writer_ev]
    cross = np.nonzero((reader_epoch >= 0) & (writer_epoch >= 0) & (reader_epoch != writer_epoch))[0]
    pairs: dict[tuple[int, int], list[int]] = defaultdict(list)
    for edge in cross.tolist():
        pairs[(int(writer_epoch[edge]), int(reader_epoch[edge]))].append(edge)
    objective_cache: dict[int, set[int]] = {}
    findings = []
    for (a_uid, b_uid), edges in pairs.items():
        epoch_a, epoch_b = df.epochs[a_uid], df.epochs[b_uid]
        call_a = df.first_backward(epoch_a)
        call_b = df.first_backward(epoch_b)
        if call_a is None or call_b is None or call_a.index >= call_b.index:
            continue  # checkpointing replays later segments first: WT303 territory
        if call_b.index not in objective_cache:
            objective_cache[call_b.index] = df.objective_events(call_b)
        objective_b = objective_cache[call_b.index]
        states: dict[int, frozenset[int]] = {}
        readers: list[int] = []
        for edge in edges:
            reader_ev = int(df.edge_reader_ev[edge])
            writer_ev = int(df.edge_writer_ev[edge])
            if reader_ev not in objective_b:
                continue
            leaves = df.provenance.get(writer_ev, frozenset())
            if not leaves:
                continue
            state = int(model.acc_array[df.edge_reader[edge]])
            states[state] = states.get(state, frozenset()) | leaves
            readers.append(reader_ev)
        if not states:
            continue
        # parameters whose gradient both backward calls accumulate, not zeroed in between
        summed = set()
        for leaf in set().union(*states.values()):
            grad_id = df.grad_array(leaf, call_a.begin_seq)
            if grad_id < 0:
                continue
            if (
                df.fills(grad_id, call_a.index)
                and df.fills(grad_id, call_b.index)
                and not grad_cleared(model, df, grad_id, call_a.end_seq, call_b.begin_seq)
            ):
                summed.add(leaf)
        if not summed:
            continue
        state_labels = [array_label(model, s) for s in states]
        params = [array_label(model, p) for p in sorted(summed)]
        later = (
            "by the same call in a later iteration"
            if call_b.site == call_a.site
            else f"at line {model.location(call_b.site).line}"
        )
        message = (
            f"this backward covers one tape only, but the state {join_names(state_labels)} it produced from "
            f"{join_names(params)} is read by the next tape (line {model.event_location(readers[0]).line}), "
            f"which is backpropagated separately ({later}) while the "
            f"gradients of {join_names(params)} are summed across both: every path through the carried state "
            "is dropped (a truncated horizon). If truncated backpropagation through time is intended, this "
            "is by design; otherwise use one tape over the whole horizon with distinct per-step buffers"
        )
        findings.append(
            finding(
                WT302,
                Severity.ERROR,
                message,
                model.location(call_a.site, "backward"),
                related=[
                    model.event_location(readers[0], "read on the next tape"),
                    model.location(call_b.site, "next backward"),
                ],
                evidence={
                    "first_seq": call_a.begin_seq,
                    "backward_seqs": [call_a.begin_seq, call_b.begin_seq],
                    "state_array_ids": sorted(states),
                    "parameters": sorted(summed),
                },
                key=(call_a.site,),
            )
        )
    return findings


RULE = Rule((WT302,), check)
