"""A hand seed that may not match the objective the program reports (WT304).

WT304 manual-seed
    Summary: a hand seed on a multi-element array whose values the program turns into another objective
    Severity: warning
    Proves:
        ``tape.backward()`` without ``loss=``, seeded by hand on an array of N > 1 elements
        (``x.grad.fill_(1.0)``, ``assign``, or ``backward(grads={x: ones})``), whose values the
        program read off the tape before the backward to form an objective (by the host:
        ``objective = y.numpy().mean()``, or by an untaped reduction). The gradient is that of
        the *sum* of the N elements, N times the gradient of their mean: right if the objective
        is the sum, wrong by exactly N if it is the mean.
    Mechanism:
        A seed defines the objective: ``sum(seed * y)``. ``tape.backward(loss)`` seeds a scalar
        with 1.0; a hand seed on a vector is Warp's vector-Jacobian product, correct only for
        the objective it defines. A clean power of two between the gradient and the expected one
        is the usual hint.
    Evidence:
        A memset or copy into a gradient buffer of more than one element (or a ``grads=``
        backward), a value read of the seeded array after it was last written and before the
        backward (on the host, with the source text of that line when it takes a mean), or an
        untaped launch reducing it. The trace cannot see what the host computes from the values
        (sum or mean), hence a warning, not an error.
    Example: wt304_fill_seed
    Fix:
        Reduce to a scalar loss on the tape (with the 1/N of a mean) and call
        ``tape.backward(loss)``.
    Silent on:
        ``backward(grads={y: ones})`` with nothing forming another objective from ``y`` (Warp's
        documented vector-Jacobian product: the seeded sum *is* the objective);
        ``wp.autograd.jacobian`` seeding one element at a time; values looked at only after the
        backward; a nonzero fill of the ``.grad`` of an input the recording never writes
        (pre-accumulation, not a seed).
    Look-alikes: ok_flow_vjp_seed, ok_acc_jacobian_rows
    Warp documentation:
        ``Tape.backward`` (``grads=``) and "Differentiability", section "Debugging Gradients".

Findings are grouped by root cause (the user line to change) with a count.
"""

from __future__ import annotations

import re

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
    reads: dict[int, tuple] = {}
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
            objective_ev = _objective_read(model, df, int(owner), call, reads)
            if objective_ev < 0:
                continue  # no reported objective the seed could contradict
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
            related.append(model.event_location(objective_ev, "objective"))
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


# A host line that reduces what it reads to a mean: `np.mean(y.numpy())`, `y.numpy().mean()`,
# `np.average(...)`, `y.numpy().sum() / n`.
_MEAN = re.compile(r"\b(?:nan)?(?:mean|average)\s*\(|\bsum\s*\([^#]*\)\s*/")


def _objective_read(
    model: Model, df: Dataflow, owner: int, call: BackwardCall, cache: dict[int, tuple]
) -> int:
    """The event that forms, from the values of ``owner`` (its allocation) after their last write
    and before ``call``, an objective the backward does not differentiate; -1 when none shows.

    Either an untaped launch or native utility reducing them (it writes an array with fewer
    elements), or a host read (``.numpy()``, ``.list()``) on a line that takes their mean. A
    host read that only checks or prints the values forms no objective the trace can see.
    An array the replayed recording never writes (an input whose ``.grad`` is pre-filled to
    accumulate onto) is no output, and its fill no seed: -1."""
    info = model.arrays.get(owner)
    if info is None:
        return -1
    found = cache.get(info.alloc_id)
    if found is None:
        rows = np.nonzero(model.acc_alloc == info.alloc_id)[0]
        evs = model.acc_ev[rows]
        rows, evs = rows[evs >= 0], evs[evs >= 0]
        value_read = model.kind[evs] == K[S.VALUE_READ]
        # a copy only moves the values (a snapshot of the outputs, as jacobian_fd takes)
        untaped = ~model.recorded[evs] & ~model.adjoint[evs] & (model.phase[evs] == S.FORWARD)
        untaped &= np.isin(model.kind[evs], [K[S.LAUNCH], K[S.NATIVE]])
        is_read = value_read | (untaped & ((model.acc_role[rows] & S.ROLE_READ) != 0))
        is_write = ((model.acc_role[rows] & S.ROLE_WRITE) != 0) & ~value_read & ~model.adjoint[evs]
        taped = is_write & model.recorded[evs]
        # rows are in seq order, so each of these is sorted by seq; an epoch's first taped write
        # tells whether it has one before any given seq
        taped_epochs = df.ev_epoch[evs[taped]]
        epochs, first = np.unique(taped_epochs, return_index=True)
        found = cache[info.alloc_id] = (
            evs[is_read], model.seq[evs[is_read]], model.seq[evs[is_write]], model.seq[evs[taped]],
            dict(zip(epochs.tolist(), first.tolist())),
        )  # fmt: skip
    read_evs, read_seqs, write_seqs, taped_seqs, first_taped = found
    first = first_taped.get(call.epoch)
    if first is None or taped_seqs[first] >= call.begin_seq:
        return -1  # not an output of what this backward replays
    before = int(np.searchsorted(write_seqs, call.begin_seq, side="left"))
    last_write = int(write_seqs[before - 1]) if before else -1
    lo = int(np.searchsorted(read_seqs, last_write, side="right"))
    hi = int(np.searchsorted(read_seqs, call.begin_seq, side="left"))
    for ev in read_evs[lo : max(lo, hi)].tolist():
        if model.kind[ev] == K[S.VALUE_READ]:
            if _MEAN.search(model.event_location(ev).text):
                return int(ev)
        elif _reduces(model, ev, info.size):
            return int(ev)
    return -1


def _reduces(model: Model, ev: int, size: int) -> bool:
    """Whether event ``ev`` writes a (non-gradient) array with fewer than ``size`` elements."""
    for row in access_rows(model, ev):
        if model.acc_role[row] & S.ROLE_WRITE and not model.acc_flags[row] & S.FLAG_GRAD:
            written = model.arrays.get(int(model.acc_array[row]))
            if written is not None and written.size < size:
                return True
    return False


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
