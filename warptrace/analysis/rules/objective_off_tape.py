"""The scalar objective computed by an untaped launch (WT305).

WT305 objective-off-tape
    Summary: the scalar objective computed by an untaped launch
    Severity: error
    Proves:
        The scalar objective is computed by a launch that is not recorded (outside
        ``with tape:`` or ``record_tape=False``) from outputs of a tape that is backpropagated
        afterwards: the backward is seeded on that untaped scalar (no recorded launch wrote it:
        zero gradients), or on a taped partial result that the untaped launch goes on to
        combine with other differentiable inputs, or by hand while the untaped scalar is what
        is reported.
    Mechanism:
        The backward replays only what the tape recorded; an untaped reduction is not part of
        it. Seeding its output gives zero gradients; seeding a partial result differentiates
        another objective than the one printed.
    Evidence:
        An untaped launch event reading arrays written by launches of a backpropagated tape and
        writing a small array that the backward is seeded on, or that the program reads as its
        objective around a hand-seeded backward.
    Example: wt305_untaped_loss
    Fix:
        Record the launch on the tape and backpropagate the scalar it writes.
    Silent on:
        Untaped launches and numpy round trips that only log or display values.
    Look-alikes: ok_flow_host_logging
    Warp documentation:
        "Differentiability", section "Debugging Gradients"; ``Tape.backward``.

Findings are grouped by root cause (the user line to change) with a count.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from warptrace.analysis.dataflow import BackwardCall, Dataflow, dataflow_of
from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import K, Model
from warptrace.analysis.rules.common import (
    DOC_DEBUG,
    Rule,
    access_rows,
    array_label,
    differentiable_dtype,
    differentiable_reads,
    finding,
    join_names,
    memory_key,
)
from warptrace.trace import schema as S

WT305 = RuleInfo(
    code="WT305",
    name="objective-off-tape",
    family="flow",
    fix="record the launch that computes the objective inside `with tape:` and call "
    "tape.backward() on the scalar it writes",
    doc=DOC_DEBUG,
)


def check(model: Model) -> list[Finding]:
    df = dataflow_of(model)
    findings = []
    untaped = np.nonzero(
        (model.kind == K[S.LAUNCH])
        & ~model.recorded
        & ~model.adjoint
        & (model.phase == S.FORWARD)
        & (model.parent < 0)
    )[0]
    for ev in untaped.tolist():
        scalars = []
        for row in access_rows(model, ev):
            info = model.arrays.get(int(model.acc_array[row]))
            written = df.is_write[row] and not df.grad_row_mask[row] and not df.is_uncertain[row]
            if written and info is not None and info.size == 1 and differentiable_dtype(info.dtype):
                scalars.append(int(model.acc_array[row]))
        if not scalars:
            continue
        # taped outputs it reads, per epoch
        taped: dict[int, list[int]] = defaultdict(list)
        for row in access_rows(model, ev):
            if not df.is_read[row]:
                continue
            for writer in df.writer_rows(row).tolist():
                uid = int(df.ev_epoch[df.acc_ev[writer]])
                if uid >= 0:
                    taped[uid].append(int(model.acc_array[row]))
        for uid, inputs in taped.items():
            call = df.first_backward(df.epochs[uid], int(model.seq[ev]))
            if call is None:
                continue
            found = _off_tape(model, df, ev, scalars, inputs, call)
            if found is not None:
                findings.append(found)
                break
    return findings


def _off_tape(
    model: Model, df: Dataflow, ev: int, scalars: list[int], inputs: list[int], call: BackwardCall
) -> Finding | None:
    seq = int(model.seq[ev])
    scalar_keys = {memory_key(model, s) for s in scalars}
    objective = scalars[0]
    why = ""
    if call.loss >= 0 and memory_key(model, call.loss) in scalar_keys:
        why = (
            f"`tape.backward({array_label(model, call.loss)})` (line {model.location(call.site).line}) seeds a scalar "
            "no recorded launch wrote, so no gradient reaches the tape"
        )
    elif call.loss >= 0 and memory_key(model, call.loss) in {memory_key(model, a) for a in inputs}:
        others = [
            a
            for a in differentiable_reads(model, df, ev, call.begin_seq)
            if memory_key(model, a) != memory_key(model, call.loss)
        ]
        if others or any(df.has_grad(s, call.begin_seq) for s in scalars):
            why = (
                f"the backward (line {model.location(call.site).line}) is seeded on the taped partial result "
                f"`{array_label(model, call.loss)}` and misses what this launch adds"
                + (f" ({join_names(array_label(model, a) for a in others)})" if others else "")
            )
    elif call.loss < 0:
        seeded = {memory_key(model, owner) for _, _, owner, _ in df.seeds(call) if owner >= 0}
        reads = [r for s in scalars for r in df.reads_between(s, seq, call.begin_seq).tolist()]
        from_seeded = bool(seeded & {memory_key(model, a) for a in inputs})
        if from_seeded and any(model.kind[df.acc_ev[r]] == K[S.VALUE_READ] for r in reads):
            why = (
                f"the objective is read back while the backward (line {model.location(call.site).line}) is "
                "seeded by hand on taped outputs"
            )
    if not why:
        return None
    message = (
        f"the objective `{array_label(model, objective)}` is computed by `{model.kernel_name(ev)}`, which is not "
        f"recorded on the tape, from taped outputs {join_names(array_label(model, a) for a in inputs)}: {why}"
    )
    return finding(
        WT305,
        Severity.ERROR,
        message,
        model.event_location(ev, "untaped launch"),
        related=[model.location(call.site, "backward")],
        evidence={"first_seq": seq, "launch_seq": seq, "objective_array_id": int(objective)},
        key=(int(model.site[ev]),),
    )


RULE = Rule((WT305,), check)
