"""A launch or copy outside the tape that cuts the path to the loss (WT309).

WT309 untaped-producer
    Summary: an untaped launch or copy computes from the parameters an input of the taped path
    Severity: error (warning for a launch inside a tape's scope with ``record_tape=False``)
    Proves:
        A launch not recorded on any tape computes an array from arrays that have a gradient,
        and a recorded launch reads that array on the way to the loss; the program then reads a
        gradient the cut leaves incomplete (of one of the launch's inputs, or of a parameter
        upstream: an optimizer step, ``numpy()``, a copy). The classic shape is a first kernel
        left above ``with tape:``. The same cut by a copy the tape did not record: an array
        written back from the bytes of a value read (``wp.array(y.numpy())``), or filled from
        memory a recorded launch wrote through a source without a gradient.
    Mechanism:
        The backward replays only what the tape recorded, so it stops at that array and the
        parameters the untaped launch read get no gradient through it (exactly zero when that
        is their only path). Warp records a copy only when both arrays have gradients; on the
        CPU ``numpy()`` returns a view of ``y``, and a copy from it reads ``y``'s memory.
    Evidence:
        The untaped launch event (tape none, or ``record_tape=False``), its read and write
        accesses, the recorded launch that reads its output on the backward slice of the loss,
        the host transfers linked by content digest, and the later value reads of the affected
        gradients.
    Example: wt309_untaped_init
    Fix:
        Launch the kernel inside ``with tape:`` (or record it: drop ``record_tape=False``);
        compute on the tape with a kernel (or ``wp.clone``) instead of a round trip through
        numpy.
    Silent on:
        A quantity computed once from the parameters outside the tape on purpose (inverse
        masses at build time, collision contacts, precomputed normals) whose parameters'
        gradients nobody reads; update steps (a launch that reads a gradient, an optimizer);
        launches that read no array with a gradient; arrays a ``tape.record_func`` declares;
        hand-written checkpointing (WT303 judges it); integer arrays; arrays a recorded launch
        rewrote before the read. State copied from another tape's recording is WT302's.
    Look-alikes: ok_flow_untaped_constant, ok_mem_optimizer
    Warp documentation:
        "Differentiability", section "Debugging Gradients"; ``Tape``.

Findings are grouped by root cause (the launch to move) with a count.
"""

from __future__ import annotations

import numpy as np

from warptrace.analysis.dataflow import Dataflow, dataflow_of
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
    shared,
)
from warptrace.trace import schema as S

WT309 = RuleInfo(
    code="WT309",
    name="untaped-producer",
    family="flow",
    fix="launch the kernel inside `with tape:` (or drop record_tape=False) so that the backward reaches it; "
    "replace a round trip through numpy by a kernel on the tape",
    doc=DOC_DEBUG,
)


# A copy that is no round trip through the host (``links``) and carried no recorded write
# (``_copied_from_many``) has no sources: it is skipped before the checks in front of that one,
# which can only skip it too (tests turn this off to compare with going through them all).
_SKIP_SOURCELESS_COPIES = True


def check(model: Model) -> list[Finding]:
    forward_untaped = ~model.recorded & (model.phase == S.FORWARD) & ~model.adjoint & (model.parent < 0)
    untaped_copy = forward_untaped & (model.kind == K[S.COPY])
    # producers: unrecorded launches; a copy that wrote back the bytes of a value read
    # (wp.array(y.numpy()), assign from the host: a round trip through the host, which the
    # backward cannot follow either); an unrecorded copy from memory a recorded launch wrote
    # (Warp records a copy only when both arrays have gradients: wp.array(y.numpy()) on the
    # CPU copies from a view of y)
    untaped = untaped_copy | (forward_untaped & (model.kind == K[S.LAUNCH]))
    if not untaped.any():
        return []
    df = dataflow_of(model)
    links = {ev: read for ev, read in df.host_links.items() if untaped_copy[ev]} if untaped_copy.any() else {}
    pairs = backpropagated(df)
    if not pairs:
        return []
    slices = df.objective_arrays_many([call for _, call in pairs])
    findings = []
    last_read, windows = _grad_read_tables(model)  # of _grads_read_after
    written_by: dict[int, set[int]] = {}  # per producer event: the arrays it writes
    updates: dict[int, bool] = {}  # per producer event: whether it is an update step
    dtype_ok: dict[int, bool] = {}  # per array: known, of a floating-point (differentiable) dtype
    for (epoch, call), consumers in zip(pairs, slices):
        if not len(consumers):
            continue
        when = call.begin_seq
        hit_producers, firsts, arrays = _first_untaped_reads(model, df, consumers, untaped)
        reported: set[int] = set()
        copied = _copied_from_many(model, df, hit_producers, when, epoch.uid)
        for producer, k, array_id, site, is_copy in zip(
            hit_producers.tolist(),
            firsts.tolist(),
            arrays.tolist(),
            model.site[hit_producers].tolist(),
            (model.kind[hit_producers] == K[S.COPY]).tolist(),
        ):
            differentiable = dtype_ok.get(array_id)
            if differentiable is None:
                info = model.arrays.get(array_id)
                differentiable = dtype_ok[array_id] = info is not None and differentiable_dtype(info.dtype)
            if site in reported or not differentiable:
                continue
            read_back = links.get(producer)
            if read_back is None and is_copy and producer not in copied and _SKIP_SOURCELESS_COPIES:
                continue  # no sources (below), whatever it writes: most of them (drone: 27,680 of 33,640)
            written = written_by.get(producer)
            if written is None:
                rows_of = np.arange(int(model.acc_start[producer]), int(model.acc_stop[producer]))
                written = written_by[producer] = set(model.acc_array[rows_of[df.is_write[rows_of]]].tolist())
            if _grads_read_after_in(model, df, last_read, windows, written, call.end_seq):
                continue  # (hand-written checkpointing: see _grads_read_after)
            if read_back is not None:  # the array whose values left through numpy() and came back
                origin = int(model.array_id[read_back])
                sources = [origin] if df.has_grad(origin, when) and origin not in written else []
            elif is_copy:
                sources = [s for s in copied.get(producer, ()) if s not in written]
            else:
                sources = [s for s in differentiable_reads(model, df, producer, when) if s not in written]
            if not sources:
                continue
            if producer not in updates:
                updates[producer] = _update_step(model, df, producer)
            if updates[producer]:
                continue
            # the cut matters where the program uses a gradient it loses: a source's, or that of a
            # parameter upstream of it, read after the backward (an optimizer, numpy(), a copy)
            origin_ev = read_back if read_back is not None else producer
            upstream = set(sources) | set(df.provenance.get(origin_ev, frozenset()))
            if not _grads_read_after_in(model, df, last_read, windows, upstream, call.end_seq):
                continue
            if array_id in shared(model, "record_func_declared", _declared_by_epoch).get(epoch.uid, ()):
                continue  # a tape.record_func supplies its adjoint
            consumer = int(consumers[k])
            findings.append(_untaped(model, df, array_id, producer, consumer, call.site, sources, read_back))
            reported.add(site)
    return findings


def _first_untaped_reads(
    model: Model, df: Dataflow, consumers: np.ndarray, untaped: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The untaped producers (``untaped`` per event) of the reads, not of a gradient buffer, of
    the events ``consumers``, ascending, and for each the first such read (by row, then nearest
    producer first): the position of its event in ``consumers`` and its array id. Through the
    consumers' def-use edges (one range per event), not their access rows."""
    edges, index = df.edges_of_events(consumers)
    producers = df.edge_writer_ev[edges]
    hit = np.nonzero(untaped[producers] & ~df.grad_row_mask[df.edge_reader[edges]])[0]
    # one read per untaped producer (the first): its findings are per producer
    hit_producers, first = np.unique(producers[hit], return_index=True)
    firsts = hit[first]
    return hit_producers, index[firsts], model.acc_array[df.edge_reader[edges[firsts]]]


def _last_host_side_read(model: Model) -> np.ndarray:
    """Per allocation id, the seq of its last read by an event that is not an adjoint launch
    (a copy or ``assign``, a value read, a forward launch, a backward's seed), -1 when none."""
    n = int(model.acc_alloc.max(initial=-1)) + 1
    last = np.full(n + 1, -1, dtype=np.int64)
    ev = dataflow_of(model).acc_ev
    # outside the graph replays that copy an earlier one (Model.decided_rows); such a copy reads
    # what its template read, at seqs shifted by the same offset: the latest copy's decide
    decided = model.decided_rows
    rows = np.nonzero(
        ((model.acc_role[decided] & S.ROLE_READ) != 0)
        & (model.acc_alloc[decided] >= 0)
        & ~model.adjoint[ev[decided]]
    )[0]
    rows = rows if isinstance(decided, slice) else decided[rows]
    np.maximum.at(last, model.acc_alloc[rows], model.acc_seq[rows])
    latest: dict[tuple[int, int], int] = {}  # template rows -> the largest seq offset of a copy
    for start, stop, template in model.row_copies:
        offset = int(model.acc_seq[start] - model.acc_seq[template])
        key = (template, template + stop - start)
        latest[key] = max(latest.get(key, offset), offset)
    for (first, end), offset in latest.items():
        copied = rows[np.searchsorted(rows, first) : np.searchsorted(rows, end)]
        np.maximum.at(last, model.acc_alloc[copied], model.acc_seq[copied] + offset)
    return last


def _grads_read_after(model: Model, df: Dataflow, arrays: set[int], after: int) -> bool:
    """Whether the gradient of one of ``arrays`` is read after the backward (``after``: its end)
    by something other than an adjoint launch. Of the untaped launch's outputs: hand-written
    checkpointing carries the adjoint across that boundary itself
    (``q_end.grad.assign(checkpoint.grad)``, a seed, a copy to the host), and WT303 judges
    whether it carries all of it. Of its sources and the parameters upstream of them: the
    program uses a gradient the cut makes incomplete."""
    last_read, windows = _grad_read_tables(model)
    return _grads_read_after_in(model, df, last_read, windows, arrays, after)


def _grad_read_tables(model: Model) -> tuple[np.ndarray, dict[int, tuple[int, ...]]]:
    """What :func:`_grads_read_after` looks up (shared by the model's rules): per allocation the
    last host-side read's seq, and per array whose .grad never changes (Dataflow.static_grad)
    the seqs ``after`` for which the answer is yes, [since, last read of the grad's memory);
    () where it changes (filled as asked)."""
    last_read = shared(model, "last_host_side_read", _last_host_side_read)
    windows: dict[int, tuple[int, ...]] = shared(model, "grad_read_windows", lambda _: {})
    return last_read, windows


def _grads_read_after_in(
    model: Model,
    df: Dataflow,
    last_read: np.ndarray,
    windows: dict[int, tuple[int, ...]],
    arrays: set[int],
    after: int,
) -> bool:
    """:func:`_grads_read_after` with its tables (:func:`_grad_read_tables`) looked up once by
    the caller (WT309 asks 33,640 times on drone)."""
    for array_id in arrays:
        window = windows.get(array_id)
        if window is None:
            window = windows[array_id] = _grad_read_window(model, df, last_read, array_id)
        if window:
            if window[0] <= after < window[1]:
                return True
            continue
        grad = df.grad_array(array_id, after)
        info = model.arrays.get(grad) if grad >= 0 else None
        if info is not None and 0 <= info.alloc_id < len(last_read) and last_read[info.alloc_id] > after:
            return True
    return False


def _grad_read_window(model: Model, df: Dataflow, last_read: np.ndarray, array_id: int) -> tuple[int, ...]:
    """See :func:`_grads_read_after`: (since, until), empty (never) when until <= since; () when
    the array's gradient changes over time."""
    static = df.static_grad(array_id)
    if static is None:
        return ()
    since, grad = static
    info = model.arrays.get(grad) if grad >= 0 else None
    if info is None or not 0 <= info.alloc_id < len(last_read):
        return (0, 0)  # no grad memory: never
    return (since, int(last_read[info.alloc_id]))


def _copied_from_many(
    model: Model, df: Dataflow, producers: np.ndarray, when: int, epoch: int
) -> dict[int, list[int]]:
    """Per unrecorded copy among ``producers``: the arrays with a gradient whose recorded writes it
    carried, the arrays a launch recorded in the same tape recording (``epoch``) wrote into the
    memory the copy read (its own source may be a view without a gradient, such as the array
    ``numpy()`` returned on the CPU). State carried from another tape's recording is WT302's
    (truncated horizon)."""
    copies = producers[model.kind[producers] == K[S.COPY]]
    if not len(copies):
        return {}
    rows, index = df.rows_of_events(copies)
    keep = df.is_read[rows] & ~df.grad_row_mask[rows]
    rows, index = rows[keep], index[keep]
    writer_rows, owner = df.writer_rows_many(rows)
    writers = df.acc_ev[writer_rows]
    keep = (model.kind[writers] == K[S.LAUNCH]) & model.recorded[writers] & (df.ev_epoch[writers] == epoch)
    out: dict[int, list[int]] = {}
    for copy, array_id in zip(
        copies[index[owner[keep]]].tolist(), model.acc_array[writer_rows[keep]].tolist()
    ):
        if df.has_grad(int(array_id), when):
            arrays = out.setdefault(int(copy), [])
            if array_id not in arrays:
                arrays.append(int(array_id))
    return out


def _reads_a_gradient(model: Model, df: Dataflow, ev: int) -> bool:
    rows = np.arange(int(model.acc_start[ev]), int(model.acc_stop[ev]))
    return bool(np.any(df.is_read[rows] & df.grad_row_mask[rows]))


def _update_step(model: Model, df: Dataflow, producer: int) -> bool:
    """Whether the untaped launch applies gradients: it reads a gradient buffer, or an array last
    written from one (``v.assign(v.grad)`` before a level-set advection). An optimizer or
    update step between iterations writes the next iteration's parameters: they are leaves
    of the next tape, not intermediates of this one."""
    if _reads_a_gradient(model, df, producer):
        return True
    rows = np.arange(int(model.acc_start[producer]), int(model.acc_stop[producer]))
    rows = rows[df.is_read[rows]]
    if not len(rows):
        return False
    writer_rows, _ = df.writer_rows_many(rows)
    return any(_reads_a_gradient(model, df, int(ev)) for ev in np.unique(df.acc_ev[writer_rows]).tolist())


def _declared_by_epoch(model: Model) -> dict[int, set[int]]:
    """Per tape epoch uid: the arrays its ``tape.record_func`` events declare (an event not placed
    in an epoch counts for every epoch of its tape)."""
    out: dict[int, set[int]] = {}
    funcs = np.nonzero(model.kind == K[S.RECORD_FUNC])[0].tolist()
    if not funcs:
        return out
    df = dataflow_of(model)
    by_tape: dict[int, list[int]] = {}
    for epoch in df.epochs:
        by_tape.setdefault(epoch.tape, []).append(epoch.uid)
    for ev in funcs:
        uid = int(df.ev_epoch[ev])
        uids = [uid] if uid >= 0 else by_tape.get(int(model.tape[ev]), [])
        for u in uids:
            out.setdefault(u, set()).update(model.declared_arrays(ev))
    return out


def _untaped(
    model: Model,
    df: Dataflow,
    array_id: int,
    producer: int,
    consumer: int,
    backward_site: int,
    sources: list[int],
    read_back: int | None,
) -> Finding:
    label = array_label(model, array_id)
    leaves = df.provenance.get(read_back if read_back is not None else producer, frozenset())
    params = [array_label(model, leaf) for leaf in sorted(leaves)] or [array_label(model, s) for s in sources]
    is_copy = read_back is None and model.kind[producer] == K[S.COPY]
    in_scope = int(model.tape[producer]) >= 0 and read_back is None and not is_copy
    read_on_tape = (
        f"`{label}` is read by `{model.kernel_name(consumer)}` (line {model.event_location(consumer).line}) on "
        "the tape, on the way to the loss, but "
    )
    cut = (
        f"the backward stops at `{label}`, so {join_names(params)} "
        f"{'gets' if len(set(params)) == 1 else 'get'} no gradient through it"
    )
    if read_back is not None:
        message = read_on_tape + (
            f"was written from host memory (line {model.event_location(producer).line}) holding the values "
            f"`{array_label(model, sources[0])}` had when read back to the host (line "
            f"{model.event_location(read_back).line}): a round trip through numpy is not recorded, and {cut}"
        )
        role = "host write"
    elif is_copy:
        message = read_on_tape + (
            f"was copied (line {model.event_location(producer).line}) from memory that "
            f"{join_names(array_label(model, s) for s in sources)} (with a gradient) holds, by a copy the "
            "tape did not record (Warp records a copy only when both arrays have gradients: its source here "
            f"is a view without one, such as the array numpy() returns on the CPU); {cut}"
        )
        role = "unrecorded copy"
    else:
        how = (
            "it was launched with record_tape=False inside the tape's scope"
            if in_scope
            else "it ran outside every tape's scope, not inside a `with tape:` block"
        )
        message = read_on_tape + (
            f"was computed by `{model.kernel_name(producer)}` (line {model.event_location(producer).line}) from "
            f"{join_names(array_label(model, s) for s in sources)}, which "
            f"{'has' if len(sources) == 1 else 'have'} a gradient, and that launch is not recorded on any tape "
            f"({how}); {cut}"
        )
        role = "untaped launch"
    related = [model.event_location(consumer, "read on the tape"), model.location(backward_site, "backward")]
    if read_back is not None:
        related.insert(0, model.event_location(read_back, "read to the host"))
    return finding(
        WT309,
        Severity.WARNING if in_scope else Severity.ERROR,
        message,
        model.event_location(producer, role),
        related=related,
        evidence={
            "first_seq": int(model.seq[producer]),
            "array_id": array_id,
            "producer_seq": int(model.seq[producer]),
            "consumer_seq": int(model.seq[consumer]),
            "sources": sorted(int(s) for s in sources),
        },
        key=(int(model.site[producer]),),
    )


RULE = Rule((WT309,), check)
