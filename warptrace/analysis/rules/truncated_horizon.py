"""State carried between tapes that are backpropagated separately (WT302).

WT302 truncated-horizon
    Summary: state carried between tapes that are backpropagated separately, their gradients summed
    Severity: error
    Proves:
        State written on one tape by launches that depend on parameters is read on a later
        tape; each tape is backpropagated on its own (the earlier one first) and the parameter
        gradients of both are summed (in ``.grad``, by a kernel, by ``wp.copy`` or on the host).
        The later tape treats the carried state as a constant: every path by which the
        parameters act on later windows through that state is dropped.
    Mechanism:
        A tape per frame or window with ``backward()`` inside the loop: each backward stops at
        the state its tape received. Per-window finite differences agree with the gradient,
        full-horizon ones do not; training stalls or gets worse. The state may travel through
        the same buffers, a rebinding, ``wp.copy`` or a numpy round trip (linked by content
        digest). Deliberate truncated backpropagation through time does exactly this; the
        finding says what is dropped.
    Evidence:
        Writes on tape A and reads on tape B of the same memory (or of a host copy with the
        same digest), backward events of A and B, the dataflow from parameters into the
        carried state, and the accumulation of both backwards' parameter gradients with no
        zeroing between them.
    Example: wt302_frames
    Fix:
        One tape over the whole horizon, ``steps + 1`` distinct state buffers and per-step
        intermediates, one backward (checkpoint segments if memory is the issue, handing the
        adjoints over: WT303).
    Silent on:
        Per-window backward with no carried state (each window starts from fresh inputs); a
        time loop on one tape.
    Look-alikes: ok_flow_fresh_window, ok_flow_time_loop
    Warp documentation:
        "Differentiability", sections "Debugging Gradients" and "Limitations and Workarounds";
        ``Tape.backward``.

Findings are grouped by root cause (the user line to change) with a count.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from warptrace.analysis.dataflow import BackwardCall, Dataflow, dataflow_of
from warptrace.analysis.dataflow.base import isin_ids
from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import K, Model
from warptrace.analysis.rules.common import (
    DOC_LIMITS,
    Rule,
    access_rows,
    array_label,
    finding,
    join_names,
    memory_key,
    quote,
)
from warptrace.trace import schema as S

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
    pairs = _cross_tape_reads(model, df)
    objective_cache: dict[int, set[int]] = {}
    findings = []
    for (a_uid, b_uid), reads in pairs.items():
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
        for writer_ev, reader_ev, reader_row in reads:
            if reader_ev not in objective_b:
                continue
            leaves = df.provenance.get(writer_ev, frozenset())
            if not leaves:
                continue
            state = int(model.acc_array[reader_row])
            states[state] = states.get(state, frozenset()) | leaves
            readers.append(reader_ev)
        if not states:
            continue
        # parameters whose gradients both backward calls produce and something sums
        summed: dict[int, str] = {}
        for leaf in set().union(*states.values()):
            grad_id = df.grad_array(leaf, call_a.begin_seq)
            if grad_id < 0 or not (df.fills(grad_id, call_a.index) and df.fills(grad_id, call_b.index)):
                continue
            how = _summed_by(model, df, leaf, grad_id, call_a, call_b)
            if how:
                summed[leaf] = how
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
            f"gradients of {join_names(params)} are summed across both ({_join_paths(summed.values())}): "
            f"every path through the carried state {join_names(state_labels)} is dropped (a truncated horizon). "
            "If truncated backpropagation through time is intended, this is a modeling choice; otherwise "
            "use one tape over the whole horizon with distinct per-step buffers"
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
                    "summed_by": sorted(set(summed.values())),
                },
                key=(call_a.site,),
            )
        )
    return findings


def _cross_tape_reads(model: Model, df: Dataflow) -> dict[tuple[int, int], list[tuple[int, int, int]]]:
    """(writer epoch, reader epoch) -> (writer event, reader event, reader row) for every read on
    one tape of a value a recorded event of another tape wrote: directly (the same buffers, a
    rebinding) or through untaped copies and host round trips (``wp.copy``, ``wp.array(x.numpy())``)."""
    epoch = df.ev_epoch_narrow  # the edge passes on int16 rather than int64 epochs
    reader_epoch = epoch[df.edge_reader_ev]
    taped = np.nonzero(reader_epoch >= 0)[0]  # the edges read on a tape (drone: 2.1M of 4.9M)
    writers = df.edge_writer_ev[taped]
    writer_epoch = epoch[writers]
    reader_epoch = reader_epoch[taped]
    cross = np.nonzero((writer_epoch >= 0) & (writer_epoch != reader_epoch))[0]
    columns = [
        writer_epoch[cross].astype(np.int64),
        reader_epoch[cross].astype(np.int64),
        writers[cross],
        df.edge_reader_ev[taped[cross]],
        df.edge_reader[taped[cross]],
    ]
    transfer = (
        (model.kind == K[S.COPY]) & ~model.recorded & (model.phase == S.FORWARD) & (model.parent < 0)
    )[writers]  # per event, then per edge: one gather
    via = np.nonzero(transfer)[0]
    if len(via):
        # the copies among the writers (drone: 39 events for 1,440,080 edges): marked per event,
        # which gives them in order without sorting every edge's writer
        copies = np.zeros(model.n_events, dtype=bool)
        copies[writers[via]] = True
        carried: dict[int, list[int]] = {
            writer: sorted(df.carried_writers(writer)) for writer in np.flatnonzero(copies).tolist()
        }
        # only the edges whose copy carries a recorded write go through the loop below
        carrying = [writer for writer, sources in carried.items() if sources]
        via = via[isin_ids(writers[via], np.asarray(carrying, dtype=np.int64))]
        extra: list[tuple[int, int, int, int, int]] = []
        for writer, reader_ev, reader_row, b_uid in zip(
            writers[via].tolist(),
            df.edge_reader_ev[taped[via]].tolist(),
            df.edge_reader[taped[via]].tolist(),
            reader_epoch[via].tolist(),
        ):
            for source in carried[writer]:
                a_uid = int(df.ev_epoch[source])
                if a_uid >= 0 and a_uid != b_uid:
                    extra.append((a_uid, b_uid, source, reader_ev, reader_row))
        if extra:
            added = np.asarray(extra, dtype=np.int64).T
            columns = [np.concatenate([column, more]) for column, more in zip(columns, added)]
    pairs: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    if not len(columns[0]):
        return pairs
    order = np.lexsort((columns[1], columns[0]))
    a_col, b_col, w_col, r_col, row_col = (column[order] for column in columns)
    cuts = np.nonzero((np.diff(a_col) != 0) | (np.diff(b_col) != 0))[0] + 1
    for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), len(a_col)]):
        pairs[(int(a_col[lo]), int(b_col[lo]))] = list(
            zip(w_col[lo:hi].tolist(), r_col[lo:hi].tolist(), row_col[lo:hi].tolist())
        )
    return pairs


def _summed_by(
    model: Model, df: Dataflow, leaf: int, grad_id: int, call_a: BackwardCall, call_b: BackwardCall
) -> str:
    """How the gradient of ``leaf`` from both backward calls is summed: "" when it is not.

    Kept in ``.grad`` (not zeroed between the calls); or taken out after each call, before
    the gradient is cleared, by a kernel, a copy or a host read, with the parameter itself
    unchanged in between (an optimizer step between the calls is online learning, not a sum)."""
    if not df.zeroed_between(grad_id, call_a.end_seq, call_b.begin_seq):
        return f"kept in {quote(array_label(model, grad_id) or 'the .grad')}"
    if len(df.writes_between(leaf, call_a.end_seq, call_b.begin_seq)):
        return ""
    after_a = _drained_by(model, df, grad_id, call_a.end_seq, call_b.begin_seq)
    if after_a is None:
        return ""
    next_begin = (
        df.backward_calls[call_b.index + 1].begin_seq
        if call_b.index + 1 < len(df.backward_calls)
        else int(model.seq.max()) + 1
    )
    after_b = _drained_by(model, df, grad_id, call_b.end_seq, next_begin)
    if after_b is None:
        return ""
    # evidence of a sum: both drains write the same accumulator, or the parameter is updated
    # only after the later one (the per-window gradients feed one update)
    same_target = bool(_written_memory(model, df, after_a) & _written_memory(model, df, after_b))
    end = int(model.seq.max()) + 1
    if not same_target and not len(df.writes_between(leaf, int(model.seq[after_b]), end)):
        return ""
    kind = int(model.kind[after_a])
    if kind == K[S.LAUNCH]:
        return f"by the kernel `{model.kernel_name(after_a)}`"
    if kind == K[S.COPY]:
        return "by `wp.copy` out of `.grad`"
    return "on the host, through `numpy()`"


def _drained_by(model: Model, df: Dataflow, grad_id: int, after_seq: int, before_seq: int) -> int | None:
    """The first event that reads the gradient after ``after_seq``, before it is cleared."""
    rows = df.reads_between(grad_id, after_seq, before_seq)
    for row in rows.tolist():
        ev = int(df.acc_ev[row])
        if model.phase[ev] != S.FORWARD or model.adjoint[ev]:
            continue
        if df.zeroed_between(grad_id, after_seq, int(model.seq[ev])):
            return None
        if model.kind[ev] in (K[S.LAUNCH], K[S.COPY], K[S.VALUE_READ]):
            return ev
    return None


def _written_memory(model: Model, df: Dataflow, ev: int) -> set[tuple[int, int, int]]:
    return {
        memory_key(model, int(model.acc_array[row])) for row in access_rows(model, ev) if df.is_write[row]
    }


def _join_paths(paths: Iterable[str]) -> str:
    return ", ".join(dict.fromkeys(paths))


RULE = Rule((WT302,), check)
