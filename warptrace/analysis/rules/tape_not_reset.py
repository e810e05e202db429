"""One tape backpropagated again after more launches were recorded on it (WT204).

WT204 tape-not-reset
    Summary: a tape backpropagated again after more launches were recorded on it, with no `tape.reset()`
    Severity: error
    Proves:
        A tape is backpropagated, more launches are recorded on it, and it is backpropagated
        again with no ``tape.reset()`` in between (one ``wp.Tape()`` kept across the iterations
        of a training loop), and a launch recorded after the first backward accumulates into
        memory that a launch of the earlier recording, reading an array with a gradient, also
        accumulated into (the loss each iteration adds into). The earlier recording's inputs
        get gradient a second time.
    Mechanism:
        Warp's backward replays every launch recorded since the tape's last reset, so the second
        backward runs the adjoints of the first recording again: the seed reaches both
        recordings through the shared accumulator. Iteration *k* of such a loop gets *k* times
        its gradient when nothing else changes, and a mix of old and new parameters once they
        do.
    Evidence:
        The tape's events in order: a ``backward`` event, launches recorded after it on the
        same tape with no ``reset`` event, a second ``backward``; the accumulating writes
        (``+=``, ``wp.atomic_add``) of both recordings into the same memory.
    Example: wt204_tape_kept
    Fix:
        Call ``tape.reset()`` after each backward (and ``tape.zero()``), or make a new
        ``wp.Tape()`` for each iteration.
    Silent on:
        Several backward calls over one recording with nothing recorded between them (Jacobian
        rows, ``grads=`` seeds one at a time); a second stage recorded after a first backward
        that writes other memory (the second backward replays the first stage on purpose); a
        tape reset or made anew each iteration; stores (a later store's adjoint consumes the
        gradient the earlier one would replay).
    Look-alikes: ok_acc_jacobian_rows, ok_acc_two_stage
    Warp documentation:
        "Differentiability", section "Gradient accumulation" (``Tape.zero``, ``Tape.reset``).

Findings are grouped by root cause (the backward call to follow with a reset) with a count: a
loop that keeps one tape is one finding whose count is the number of backward calls that
replayed an earlier recording.
"""

from __future__ import annotations

import numpy as np

from warptrace.analysis.dataflow import dataflow_of
from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import K, Model
from warptrace.analysis.rules.common import DOC_ACCUMULATION, Rule, differentiable_reads, finding
from warptrace.trace import schema as S

WT204 = RuleInfo(
    code="WT204",
    name="tape-not-reset",
    family="accumulation",
    fix="call tape.reset() after each backward (and tape.zero()), or make a new wp.Tape() per iteration",
    doc=DOC_ACCUMULATION,
)


def _accumulated(model: Model, ev: int) -> list[tuple[int, int]]:
    """(alloc_id, access row) of the non-gradient memory launch ``ev`` accumulates into."""
    rows = np.arange(int(model.acc_start[ev]), int(model.acc_stop[ev]))
    if not len(rows):
        return []
    keep = (
        ((model.acc_role[rows] & S.ROLE_WRITE) != 0)
        & ((model.acc_flags[rows] & S.FLAG_ACCUMULATE) != 0)
        & ((model.acc_flags[rows] & (S.FLAG_GRAD | S.FLAG_UNCERTAIN)) == 0)
        & (model.acc_alloc[rows] >= 0)
    )
    return [(int(model.acc_alloc[r]), int(r)) for r in rows[keep].tolist()]


def check(model: Model) -> list[Finding]:
    if not any(len(t.backward_begins) > 1 for t in model.tapes.values()):
        return []
    df = dataflow_of(model)
    launch = K[S.LAUNCH]
    findings = []
    for epoch in df.epochs:
        if len(epoch.backwards) < 2 or not epoch.events:
            continue
        events = [ev for ev in epoch.events if model.kind[ev] == launch]
        seqs = [int(model.seq[ev]) for ev in events]
        calls = [df.backward_calls[i] for i in epoch.backwards]
        # alloc_id -> the first launch of an earlier recording accumulating into it (its
        # replayed adjoint sends gradient somewhere only when it reads an array with one)
        earlier: dict[int, int] = {}
        cursor = 0
        for prev, call in zip(calls, calls[1:]):
            while cursor < len(events) and seqs[cursor] < prev.begin_seq:
                for alloc, _ in _accumulated(model, events[cursor]):
                    earlier.setdefault(alloc, events[cursor])
                cursor += 1
            hit = None
            for i in range(cursor, len(events)):
                if seqs[i] >= call.begin_seq:
                    break
                if seqs[i] <= prev.end_seq:
                    continue
                for alloc, row in _accumulated(model, events[i]):
                    array_id = int(model.acc_array[row])
                    if (
                        alloc in earlier
                        and df.has_grad(array_id, call.begin_seq)
                        and differentiable_reads(model, df, earlier[alloc], call.begin_seq)
                    ):
                        hit = (earlier[alloc], events[i], row)
                        break
                if hit:
                    break
            if hit is None:
                continue
            old, new, row = hit
            array = model.array_label(int(model.acc_array[row]), model.acc_arg[row])
            kernel, old_kernel = model.kernel_name(new), model.kernel_name(old)
            backward = model.location(call.site, "backward")
            new_line, old_line = model.event_location(new).line, model.event_location(old).line
            if int(model.site[new]) == int(model.site[old]) and kernel == old_kernel:
                again = (
                    f"`{kernel}` (line {new_line}) is recorded again and accumulates into `{array}` as it did"
                )
            else:
                again = (
                    f"`{kernel}` (line {new_line}) accumulates into `{array}` as `{old_kernel}` of the earlier "
                    f"recording (line {old_line}) did"
                )
            message = (
                f"the tape is backpropagated again (line {backward.line}) after more launches were recorded on "
                f"it since its previous backward (line {model.location(prev.site).line}), with no tape.reset() in "
                "between: Warp's backward replays every launch recorded since the last reset, so this one runs "
                f"the adjoints of the earlier recording again. {again}, so the gradient from `{array}` flows "
                "into both: the earlier recording's inputs get gradient again (k times the gradient at the "
                "k-th backward of a loop that keeps one tape, when nothing else changes)"
            )
            findings.append(
                finding(
                    WT204,
                    Severity.ERROR,
                    message,
                    backward,
                    related=[
                        model.event_location(old, "earlier recording"),
                        model.event_location(new, "recorded again"),
                        model.location(prev.site, "earlier backward"),
                    ],
                    evidence={
                        "backward_seqs": [prev.begin_seq, call.begin_seq],
                        "launch_seqs": [int(model.seq[old]), int(model.seq[new])],
                        "array_id": int(model.acc_array[row]),
                    },
                    key=(int(call.site), int(model.site[old]), int(model.site[new])),
                )
            )
    return findings


RULE = Rule((WT204,), check)
