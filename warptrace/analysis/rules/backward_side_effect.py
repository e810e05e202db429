"""An adjoint launch that writes forward memory (WT308).

WT308 backward-side-effect
    Summary: an adjoint launch writes forward memory (an atomic counter replayed)
    Severity: error
    Proves:
        The adjoint launch of a recorded kernel writes forward (non-gradient) memory, and it
        matters: the kernel uses the result of the replayed function (a counter handing out
        slots) as an index, in a branch or as a factor, or a later adjoint reads that memory.
        Reported at the forward launch.
    Mechanism:
        The adjoint replays the forward body of called ``@wp.func`` functions, so an atomic
        counter inside one (``slot = wp.atomic_add(count, 0, 1)``) counts again in backward and
        hands out different slots, scattering adjoints to the wrong elements.
    Evidence:
        Write accesses by an adjoint launch (phase ``backward``) to an allocation that is not a
        gradient buffer, and the kernel-source model: the user functions the array is passed
        to, and how the kernel uses what they return.
    Example: wt308_atomic_slot
    Fix:
        Give the function a ``@wp.func_replay`` that returns the value recorded in the forward
        pass (store the slot in an array), or compute the slots in an untaped pass.
    Silent on:
        A counter outside the tape; a ``@wp.func`` that accumulates a diagnostic with an atomic
        whose replay changes no gradient; a function's result the kernel only stores, adds or
        casts (the adjoint never reads the value the replay hands out; measured exact on Warp
        1.19) and that no later adjoint reads back.
    Look-alikes: ok_flow_counter_untaped, ok_flow_replayed_accumulate, ok_src_atomic_old_value_func,
        ok_src_atomic_old_value_method
    Warp documentation:
        "Differentiability", section "Custom Replay Functions".

Findings are grouped by root cause (the user line to change) with a count.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from warptrace.analysis.dataflow import BackwardCall, Dataflow, combine_codes, dataflow_of
from warptrace.analysis.dataflow.base import expand_ranges, unique_inverse
from warptrace.analysis.findings import Finding, Location, RuleInfo, Severity
from warptrace.analysis.model import K, KernelInfo, Model
from warptrace.analysis.rules.common import (
    DOC_CUSTOM_REPLAY,
    Rule,
    access_rows,
    array_label,
    finding,
    join_names,
)
from warptrace.kernel_source import RESULT_DISCARDED, RESULT_USED
from warptrace.trace import schema as S

WT308 = RuleInfo(
    code="WT308",
    name="backward-side-effect",
    family="flow",
    fix="add a @wp.func_replay to the function with the side effect that returns the value "
    "recorded in the forward pass, or compute it in an untaped pass",
    doc=DOC_CUSTOM_REPLAY,
)


def check(model: Model) -> list[Finding]:
    df = dataflow_of(model)
    adjoints = np.nonzero((model.kind == K[S.LAUNCH]) & model.adjoint)[0]
    findings = []
    pending: dict[int, dict[tuple, list[int]]] = {}
    candidates, rows, owner, modes = _replaying_adjoints(model, df, adjoints)
    calls = df.ev_backward[candidates]
    kernel_ids = model.kernel[candidates]
    known_ids = np.array(
        [k for k in np.unique(kernel_ids).tolist() if model.kernels.get(k) is not None], dtype=np.int64
    )
    checked = (calls >= 0) & np.isin(kernel_ids, known_ids)
    # a replayed write whose result the kernel discards matters where a later adjoint reads it:
    # that test for every such row at once
    asked = checked[owner] & (modes == RESULT_DISCARDED)
    read_later = np.zeros(len(rows), dtype=bool)
    read_later[asked] = _read_by_later_adjoint_many(
        model, df, rows[asked], candidates[owner[asked]], calls[owner[asked]]
    )
    side_of = (modes == RESULT_USED) | read_later
    # the candidates with a side row (rows come grouped by candidate, in row order)
    with_side = np.unique(owner[side_of & checked[owner]])
    starts, stops = np.searchsorted(owner, with_side), np.searchsorted(owner, with_side + 1)
    for i, start, stop in zip(with_side.tolist(), starts.tolist(), stops.tolist()):
        ev = int(candidates[i])
        kernel = model.kernels[int(kernel_ids[i])]
        call = df.backward_calls[int(calls[i])]
        side = rows[start:stop][side_of[start:stop]].tolist()
        forward = _match_forward(model, df, ev, call, pending)
        if forward < 0:
            continue
        labels = [array_label(model, int(model.acc_array[row])) for row in side]
        related = [model.location(call.site, "backward")]
        for row in side:
            arg = kernel.arg(model.acc_arg[row], model.acc_field[row])
            if arg is not None and arg.write_line >= 0:
                text = kernel.source_model.kernel_line_text(arg.write_line) or ""
                related.append(Location(kernel.file, arg.write_line, "kernel write", text, kernel.key))
        message = (
            f"the adjoint of `{kernel.key}` writes forward memory {join_names(labels)} during the backward "
            f"(line {model.location(call.site).line}): the backward replays the forward body of the @wp.func "
            "that updates it, so the side effect (an atomic counter) runs again and later adjoint reads see "
            "different values than the forward did"
        )
        findings.append(
            finding(
                WT308,
                Severity.ERROR,
                message,
                model.event_location(forward, "forward launch"),
                related=related,
                evidence={"first_seq": int(model.seq[forward]), "adjoint_seq": int(model.seq[ev])},
                key=(int(model.site[forward]), kernel.kernel_id),
            )
        )
    return findings


def _replaying_adjoints(
    model: Model, df: Dataflow, adjoints: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The adjoint launches among ``adjoints`` with a certain write to forward memory that the
    adjoint replays (:func:`_replayed_write`; a known kernel), in order: the only ones WT308 checks.
    With them, their certain writes to forward memory (access rows, grouped by adjoint in row
    order), for each row the position of its adjoint among those returned, and the
    :func:`_replayed_write` mode of each row.

    Found once per recorded event: the copies of one (graph replays, :attr:`Model.orig_seq`)
    have its kernel and access rows, at their own row numbers (drone: 217,200 adjoint launches,
    copies of 181)."""
    recorded, copy_index = unique_inverse(model.orig_seq[adjoints])
    one_copy = np.empty(len(recorded), dtype=np.int64)
    one_copy[copy_index] = adjoints  # any copy: they are the same
    rows, index = df.rows_of_events(one_copy)
    side = df.is_write[rows] & ~df.grad_row_mask[rows] & ~df.is_uncertain[rows]
    rows, index = rows[side], index[side]
    kernels = model.kernel[one_copy[index]]
    _, kernel_codes = np.unique(kernels, return_inverse=True)
    codes = combine_codes([kernel_codes.reshape(-1), model.acc_arg_code[rows], model.acc_field_code[rows]])
    unique, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    mode_of = np.zeros(len(unique), dtype=np.int64)
    for i, row in enumerate(rows[first].tolist()):
        kernel = model.kernels.get(int(kernels[first[i]]))
        if kernel is not None:
            mode_of[i] = _replayed_write(kernel, model.acc_arg[row], model.acc_field[row])
    modes = mode_of[inverse.reshape(-1)]
    chosen = np.zeros(len(recorded), dtype=bool)
    chosen[index[modes != 0]] = True
    keep = chosen[index]
    rows, index, modes = rows[keep], index[keep], modes[keep]
    # each chosen adjoint takes the side rows of its recorded event (rows come grouped by it)
    offsets = rows - model.acc_start[one_copy[index]]
    counts = np.bincount(index, minlength=len(recorded))
    firsts = np.cumsum(counts) - counts
    picked = np.nonzero(chosen[copy_index])[0]
    of = copy_index[picked]
    taken, owner = expand_ranges(firsts[of], firsts[of] + counts[of])
    events = adjoints[picked]
    return events, model.acc_start[events][owner] + offsets[taken], owner, modes[taken]


def _match_forward(
    model: Model, df: Dataflow, ev: int, call: BackwardCall, pending: dict[int, dict[tuple, list[int]]]
) -> int:
    """The recorded forward launch this adjoint launch replays: same kernel and forward arrays,
    consumed latest-first (the backward runs the tape in reverse)."""
    if call.index not in pending:
        table: dict[tuple, list[int]] = defaultdict(list)
        for fwd in df.epochs[call.epoch].events:
            if model.kind[fwd] == K[S.LAUNCH] and int(model.seq[fwd]) < call.begin_seq:
                table[_forward_signature(model, df, fwd)].append(fwd)
        pending[call.index] = table
    candidates = pending[call.index].get(_forward_signature(model, df, ev))
    if not candidates:
        return -1
    return candidates.pop()


def _forward_signature(model: Model, df: Dataflow, ev: int) -> tuple:
    arrays = sorted(
        {int(model.acc_array[row]) for row in access_rows(model, ev) if not df.grad_row_mask[row]}
    )
    return (int(model.kernel[ev]), tuple(arrays))


def _replayed_write(kernel: KernelInfo, arg: str, field_path: str) -> int:
    """Whether the adjoint of ``kernel`` really rewrites ``arg``: it is passed to a user function
    (replayed in full by the adjoint) that has no custom replay. Atomics written directly in the
    kernel body are not replayed. When the kernel uses the function's result (``slot = f(count)``)
    the replay hands out different values than the forward did: the counter pattern, when the
    kernel uses them as an index, in a branch or as a factor; stored as data they are never
    read, which counts as discarded. Unknown source: trust the recorder."""
    target = arg + ("." + field_path if field_path else "")
    mode = kernel.source_model.passes_to_function(target, tuple(kernel.custom_replay))
    if mode == RESULT_USED and not kernel.source_model.replayed_results_steer(
        target, tuple(kernel.custom_replay)
    ):
        # the result only stored, added or cast: the adjoint never reads the replay's value,
        # so only a later adjoint read of the changed memory matters (measured on Warp 1.19,
        # tests/test_warp_mechanisms_atomics.py)
        return RESULT_DISCARDED
    return mode


def _read_by_later_adjoint_many(
    model: Model, df: Dataflow, rows: np.ndarray, evs: np.ndarray, call_indexes: np.ndarray
) -> np.ndarray:
    """For each access row of ``rows``, of the adjoint launch of ``evs`` in the backward call of
    ``call_indexes``: whether a later adjoint launch of the same backward reads the forward
    memory the replayed accumulation at that row changed (only then does it alter a gradient).

    Queries of one array share its read rows (:meth:`DefUse.reads_between`'s window, in seq
    order): a running count of the rows that overlap the array and belong to an adjoint
    launch answers each query by two searches."""
    out = np.zeros(len(rows), dtype=bool)
    array_ids, by_array = unique_inverse(model.acc_array[rows])
    infos = [model.arrays.get(array_id) for array_id in array_ids.tolist()]
    index = df.read_rows_of_allocs(sorted({i.alloc_id for i in infos if i is not None and i.alloc_id >= 0}))
    order = np.argsort(by_array, kind="stable")
    cuts = np.searchsorted(by_array[order], np.arange(len(array_ids) + 1)).tolist()
    end_seq = np.array([call.end_seq for call in df.backward_calls], dtype=np.int64)
    for info, first, last in zip(infos, cuts[:-1], cuts[1:]):
        entry = None if info is None or info.alloc_id < 0 else index.get(info.alloc_id)
        if info is None or entry is None:
            continue
        queries = order[first:last]
        read_rows, seqs, lows, highs = entry
        lo, hi = info.hull
        hits = (lows < hi) & (lo < highs) & model.adjoint[df.acc_ev[read_rows]]
        running = np.concatenate(([0], np.cumsum(hits)))
        start = np.searchsorted(seqs, model.seq[evs[queries]], side="right")
        stop = np.maximum(np.searchsorted(seqs, end_seq[call_indexes[queries]], side="left"), start)
        out[queries] = running[stop] - running[start] > 0
    return out


RULE = Rule((WT308,), check)
