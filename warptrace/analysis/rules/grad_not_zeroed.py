"""Gradients accumulated across parameter updates (WT203).

WT203 grad-not-zeroed
    Summary: a backward adds into `.grad` still holding the gradient of earlier parameters
    Severity: error
    Proves:
        Two backward calls (of any tapes) accumulate into the same ``.grad`` buffers, the
        parameters owning them are written in between (an optimizer step), nothing zeroed those
        buffers in between (``tape.zero()``, ``tape.reset()``, ``zero_()``, a fresh ``.grad``),
        and the accumulated buffer is read afterwards: the optimizer consumes the running sum of
        gradients taken at different parameter values. Also when the gradient buffer is shared
        with another framework (torch, JAX, DLPack) that reads it after each call.
    Mechanism:
        Adjoints accumulate into ``.grad``; only ``tape.zero()``/``tape.reset()`` or an explicit
        ``zero_()`` clears them. A training loop without it feeds the optimizer a growing sum:
        oscillation, then blow-up. The classic framework case is a ``torch.autograd.Function``
        around a Warp tape with persistent buffers whose Warp-side ``.grad`` nobody clears.
    Evidence:
        Backward events whose adjoint launches write the same gradient allocation, the write
        to the owning parameter between them, no memset or fresh gradient of that allocation in
        between, a later value read (or a ``bridge`` export) of the gradient.
    Example: wt203_train_loop
    Fix:
        Call ``tape.zero()`` (or zero the ``.grad`` arrays) after each optimizer step, before the
        next backward.
    Silent on:
        Deliberate accumulation of one objective over several backward calls with the
        parameters unchanged: micro-batches, checkpoint segments handing adjoints over, several
        windows summed before one update.
    Look-alikes: ok_flow_microbatch, ok_flow_checkpoint_saved_adjoint, ok_flow_fresh_window
    Warp documentation:
        "Differentiability", sections "Gradient accumulation" (``Tape.zero``, ``retain_grad``)
        and "Debugging Gradients"; the FAQ "Differentiation and Interoperability" for bridges.

Findings are grouped by root cause (the user line to change) with a count: a bug in a training
loop is one finding whose count is the number of iterations it hit.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from warptrace.analysis.dataflow import BackwardCall, Dataflow, dataflow_of
from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import K, Model
from warptrace.analysis.rules.common import DOC_ACCUMULATION, Rule, access_rows, finding, join_names
from warptrace.trace import schema as S

WT203 = RuleInfo(
    code="WT203",
    name="grad-not-zeroed",
    family="accumulation",
    fix="call tape.zero() (or zero the parameters' .grad arrays) after each optimizer step, before "
    "the next backward",
    doc=DOC_ACCUMULATION + "; Debugging Gradients",
)


def check(model: Model) -> list[Finding]:
    df = dataflow_of(model)
    calls = df.backward_calls
    if len(calls) < 2:
        return []
    groups = df.fill_groups
    # (earlier call, later call) -> evidence per grad
    hits: dict[tuple[int, int], list[tuple[int, int, int, str]]] = defaultdict(list)
    for g, earlier_i, later_i, grad_id, owner, update in _updated_pairs(model, df):
        if not _read_after(model, df, grad_id, calls[later_i]):
            continue
        arg_row = int(groups.adjoint_row[g])
        arg = str(model.acc_arg[arg_row]).removeprefix("adj_") if arg_row >= 0 else ""
        hits[(earlier_i, later_i)].append((grad_id, owner, update, arg))

    findings = _bridged_findings(model, df, set(hits))
    for (earlier_i, later_i), grads in hits.items():
        earlier, later = calls[earlier_i], calls[later_i]
        owners = [model.array_label(owner, arg) for _, owner, _, arg in grads]
        grad_labels = [f"{label}.grad" for label in owners]
        update_ev = grads[0][2]
        related = [
            model.location(earlier.site, "previous backward"),
            model.event_location(update_ev, "parameter update"),
        ]
        previous = (
            "this same call, one iteration earlier"
            if earlier.site == later.site
            else f"line {model.location(earlier.site).line}"
        )
        findings.append(
            finding(
                WT203,
                Severity.ERROR,
                f"this backward adds into {join_names(grad_labels)}, which still "
                f"{'holds' if len(set(grad_labels)) == 1 else 'hold'} the gradient of the "
                f"previous backward ({previous}) although {join_names(owners)} "
                f"{'was' if len(set(owners)) == 1 else 'were'} updated in between (line "
                f"{model.event_location(update_ev).line}) and nothing zeroed them: the optimizer gets the sum "
                "of gradients taken at different parameter values",
                model.location(later.site, "backward"),
                related=related,
                evidence={
                    "first_seq": later.begin_seq,
                    "backward_seqs": [earlier.begin_seq, later.begin_seq],
                    "update_seq": int(model.seq[update_ev]),
                    "grad_array_ids": sorted({g for g, _, _, _ in grads}),
                },
                key=(later.site,),
            )
        )
    return findings


def _updated_pairs(model: Model, df: Dataflow) -> list[tuple[int, int, int, int, int, int]]:
    """Consecutive backward calls accumulating into the same gradient memory with nothing zeroing
    it in between (:meth:`Dataflow.zeroed_between`) while its owner was written outside any tape
    recording (an optimizer step): (memory group of :attr:`Dataflow.fill_groups`, earlier call,
    later call, grad array id, owner array id, event index of the owner's first such update), per
    memory in order of first fill, then in time order. Memories whose owner is unknown are skipped."""
    calls = df.backward_calls
    groups = df.fill_groups
    cuts = groups.cuts.tolist()
    pair_group: list[int] = []
    pair_owner: list[int] = []
    pair_earlier: list[np.ndarray] = []
    pair_later: list[np.ndarray] = []
    for g, first_row in enumerate(groups.first_row.tolist()):
        if cuts[g + 1] - cuts[g] < 2:
            continue
        owner = df.owner_of(int(model.acc_array[first_row]))
        if owner < 0:
            continue
        call_indexes = groups.calls[cuts[g] : cuts[g + 1]]
        pair_group += [g] * (len(call_indexes) - 1)
        pair_owner += [owner] * (len(call_indexes) - 1)
        pair_earlier.append(call_indexes[:-1])
        pair_later.append(call_indexes[1:])
    if not pair_group:
        return []
    group_of = np.asarray(pair_group, dtype=np.int64)
    earlier_of = np.concatenate(pair_earlier)
    later_of = np.concatenate(pair_later)
    end_seqs = np.array([call.end_seq for call in calls], dtype=np.int64)
    begin_seqs = np.array([call.begin_seq for call in calls], dtype=np.int64)
    after, before = end_seqs[earlier_of], begin_seqs[later_of]
    grad_ids = model.acc_array[groups.first_row[group_of]]

    # zeroed in between: a clearing store (Dataflow.clearing_store; a window search over those writes),
    # or a tape zero/reset of a tape whose backward filled it
    grad_alloc, grad_lo, grad_hi = model.memory_of(grad_ids)
    zeroed = (
        df.first_writes(df.write_index(df.clearing_store), grad_alloc, grad_lo, grad_hi, after, before) >= 0
    )
    bounds = [0, *(np.nonzero(np.diff(group_of))[0] + 1).tolist(), len(group_of)]
    for start, stop in zip(bounds, bounds[1:]):
        zeros = np.asarray(df._fill_info(int(grad_ids[start]))[2], dtype=np.int64)
        if len(zeros):
            window = slice(start, stop)
            i = np.searchsorted(zeros, after[window], side="right")
            zeroed[window] |= (i < len(zeros)) & (zeros[np.minimum(i, len(zeros) - 1)] < before[window])

    # the first write to the owner's memory in the window made outside any tape recording
    todo = np.nonzero(~zeroed)[0]
    owners = np.asarray(pair_owner, dtype=np.int64)[todo]
    owner_alloc, owner_lo, owner_hi = model.memory_of(owners)
    ev = df.acc_ev
    # per event, then one gather per access row
    recorded = (model.recorded | (model.phase != S.FORWARD) | (model.parent >= 0))[ev] | df.grad_row_mask
    updates = df.first_writes(
        df.write_index(~recorded), owner_alloc, owner_lo, owner_hi, after[todo], before[todo]
    )
    found = np.nonzero(updates >= 0)[0]
    pairs = todo[found]
    return list(
        zip(
            group_of[pairs].tolist(),
            earlier_of[pairs].tolist(),
            later_of[pairs].tolist(),
            grad_ids[pairs].tolist(),
            owners[found].tolist(),
            ev[updates[found]].tolist(),
        )
    )


def _read_after(model: Model, df: Dataflow, grad_id: int, later: BackwardCall) -> bool:
    """Whether the accumulated grad is used after the later backward (a value read, an optimizer
    kernel, a copy), before it is overwritten. A store that transforms it in place (a clip) reads
    it too: its own event counts."""
    store = df.next_store(grad_id, later.end_seq)
    stop = None
    if store >= 0:
        stop = int(model.acc_seq[store])
        if not df.clearing_store[store]:
            stop += 1  # the transforming event reads the accumulated values itself
    for row in df.iter_reads(grad_id, later.begin_seq, stop):
        ev = int(df.acc_ev[row])
        if model.phase[ev] == S.FORWARD and int(df.ev_backward[ev]) < 0:
            return True
    return False


# Frameworks with their own autograd: each backward hands them a gradient they accumulate.
_AUTOGRAD_FRAMEWORKS = ("torch", "jax")


def _shared_memory(model: Model, df: Dataflow) -> dict[int, list[tuple[int, int, int, int, str]]]:
    """Allocation -> (seq, event, lo, hi, framework) of each bridge event sharing part of it."""
    out: dict[int, list[tuple[int, int, int, int, str]]] = defaultdict(list)
    for ev in np.nonzero(model.kind == K[S.BRIDGE])[0].tolist():
        facts = model.detail(ev)
        framework = str(facts.get("framework", "")) if isinstance(facts, dict) else ""
        for row in access_rows(model, ev):
            alloc = int(model.acc_alloc[row])
            if alloc >= 0:
                out[alloc].append(
                    (int(model.seq[ev]), ev, int(df.acc_lo[row]), int(df.acc_hi[row]), framework)
                )
    return out


def _first_share(
    model: Model, shared: dict[int, list[tuple[int, int, int, int, str]]], array_id: int, before_seq: int
) -> tuple[int, str] | None:
    """(event, framework) of the first bridge sharing the array's memory before ``before_seq``."""
    info = model.arrays.get(int(array_id))
    if info is None or info.alloc_id < 0:
        return None
    lo, hi = info.hull
    for seq, ev, s_lo, s_hi, framework in shared.get(info.alloc_id, ()):
        if seq < before_seq and s_lo < hi and lo < s_hi:
            return ev, framework
    return None


def _bridged_findings(model: Model, df: Dataflow, reported: set[tuple[int, int]]) -> list[Finding]:
    """A gradient buffer shared with another framework, filled by consecutive backward calls with
    nothing zeroing it in between: the other framework may read it after each call and gets the
    running sum. Reported when the framework has its own autograd (it accumulates what each call
    hands it), or the parameter was updated in between, or the parameter is shared as well (the
    other framework may update it, invisibly)."""
    shared = _shared_memory(model, df)
    if not shared:
        return []
    calls = df.backward_calls
    groups = df.fill_groups
    cuts = groups.cuts.tolist()
    hits: dict[tuple[int, int], list[tuple[int, int, int, str]]] = defaultdict(list)
    for g, first_row in enumerate(groups.first_row.tolist()):
        if cuts[g + 1] - cuts[g] < 2:
            continue
        grad_id = int(model.acc_array[first_row])
        owner = df.owner_of(grad_id)
        call_indexes = groups.calls[cuts[g] : cuts[g + 1]].tolist()
        for earlier_i, later_i in zip(call_indexes, call_indexes[1:]):
            if (earlier_i, later_i) in reported:
                continue
            earlier, later = calls[earlier_i], calls[later_i]
            share = _first_share(model, shared, grad_id, later.end_seq)
            if share is None or df.zeroed_between(grad_id, earlier.end_seq, later.begin_seq):
                continue
            if share[1] not in _AUTOGRAD_FRAMEWORKS and not (
                owner >= 0
                and (
                    _first_share(model, shared, owner, later.begin_seq) is not None
                    or _updated(model, df, owner, earlier.end_seq, later.begin_seq)
                )
            ):
                continue
            hits[(earlier_i, later_i)].append((grad_id, owner, share[0], share[1]))
    findings = []
    for (earlier_i, later_i), grads in hits.items():
        earlier, later = calls[earlier_i], calls[later_i]
        labels = [
            model.array_label(grad_id) or f"{model.array_label(owner)}.grad" for grad_id, owner, _, _ in grads
        ]
        share_ev, framework = grads[0][2], grads[0][3]
        previous = (
            "this same call, one iteration earlier"
            if earlier.site == later.site
            else f"line {model.location(earlier.site).line}"
        )
        findings.append(
            finding(
                WT203,
                Severity.ERROR,
                f"this backward adds into {join_names(labels)}, which still holds the gradient of the previous "
                f"backward ({previous}) and is shared with {framework} (line {model.event_location(share_ev).line}), "
                "which may read it after each backward, invisibly to warptrace: nothing zeroed it in between, "
                f"so each call hands {framework} the sum of all previous gradients",
                model.location(later.site, "backward"),
                related=[
                    model.location(earlier.site, "previous backward"),
                    model.event_location(share_ev, f"shared with {framework}"),
                ],
                evidence={
                    "first_seq": later.begin_seq,
                    "backward_seqs": [earlier.begin_seq, later.begin_seq],
                    "grad_array_ids": sorted({g for g, _, _, _ in grads}),
                    "framework": framework,
                },
                key=(later.site,),
            )
        )
    return findings


def _updated(model: Model, df: Dataflow, owner: int, after_seq: int, before_seq: int) -> bool:
    """Whether the owner's memory was written outside any tape recording in the window."""
    for row in df.writes_between(owner, after_seq, before_seq).tolist():
        ev = int(df.acc_ev[row])
        if not model.recorded[ev] and model.phase[ev] == S.FORWARD and model.parent[ev] < 0:
            return True
    return False


RULE = Rule((WT203,), check)
