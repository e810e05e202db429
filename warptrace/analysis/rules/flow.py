"""Gradient flow (WT301-WT308): where the chain from parameters to the loss is cut or bent.

``tape.backward()`` can only pass gradient along what the tape recorded, through arrays
that have a ``.grad``, for kernels that have an adjoint, seeded with the right
objective. These rules follow the recorded dataflow (which launch produced the memory
each launch read) and the order of tape events to prove where that chain breaks:

WT301 severed-chain (error)
    A recorded launch reads an array that has a gradient and writes a floating-point
    array *without* ``.grad`` (``requires_grad=False``, the default of ``wp.zeros``,
    ``wp.empty``, ``wp.array``; ``empty_like``/``zeros_like`` inherit it), and a later
    recorded launch reads that array on the way to the loss. Its adjoint has nowhere
    to write: every parameter upstream gets no gradient through it (exactly zero when
    that is the only path). Reported at the array's allocation, naming the parameters
    that lose their gradient. Constants (targets, masks, index arrays, anything no
    parameter influences) are not reported.
    Fix: allocate the array with ``requires_grad=True``.

WT302 truncated-horizon (error)
    State written on one tape by launches that depend on parameters is read on a later
    tape; each tape is backpropagated on its own (the earlier one first) and the
    parameters' ``.grad`` is not zeroed between the two backward calls, so the
    gradients are summed. The later tape treats the carried state as a constant: every
    path by which the parameters act on later windows through that state is dropped.
    Deliberate truncated backpropagation through time does exactly this; the finding
    says what is dropped.
    Fix: one tape over the whole horizon, ``steps + 1`` distinct state buffers and
    per-step intermediates, one backward (checkpoint if memory is the issue).

WT303 unchained-boundary (error)
    Hand-written gradient checkpointing: a segment is replayed on a new tape and
    backpropagated after the later segment, and its backward is seeded with the later
    segment's adjoints for some of the state it hands over (a copy/assign/fill into
    ``.grad``, or ``grads=``) but not for this one. The gradient through the unseeded
    state is dropped at every boundary. Replays are matched to the original forward by
    kernel and arguments, so state recomputed into fresh arrays is recognised.
    Fix: seed every carried state array's ``.grad`` before the segment's backward.

WT304 manual-seed (warning)
    ``tape.backward()`` without ``loss=``, seeded by hand on an array of N > 1 elements
    (``x.grad.fill_(1.0)``, ``assign``, or ``backward(grads={x: ones})``): the
    gradient is that of the *sum* of the N elements, N times the gradient of their
    mean. Right if the objective is the sum; wrong by exactly N if it is the mean.
    Fix: reduce to a scalar loss on the tape (with the 1/N of a mean) and call
    ``tape.backward(loss)``.

WT305 objective-off-tape (error)
    The scalar objective is computed by a launch that is not recorded (outside ``with
    tape:`` or ``record_tape=False``) from outputs of a tape that is backpropagated
    afterwards: the backward is seeded on that untaped scalar (no recorded launch wrote
    it: zero gradients), or on a taped partial result the untaped launch goes on to
    combine with other differentiable inputs, or by hand while the untaped scalar is
    what is reported. The backward cannot include the untaped computation.
    Fix: record the launch on the tape and backpropagate the scalar it writes.

WT306 stale-grad-read (error, or warning)
    The values of a ``.grad`` buffer are read (``numpy()``, ``list()``, a copy) when the
    buffer does not hold the current gradient: after it was zeroed, or before any
    backward since the parameters last changed; the parameters are then updated
    without a fresh read. The optimizer consumes zeros or the previous iterate's
    gradient (a one-step delay). Warning when the update does not visibly use the read.
    Fix: read the gradient after this iteration's ``tape.backward()`` and zero it only
    after the update.

WT307 backward-disabled (error)
    A kernel compiled with ``enable_backward=False`` (kernel option, or module option)
    is recorded on a tape that is backpropagated, on the path from a differentiable
    input to the loss. Warp skips its adjoint (with a one-time log warning): nothing
    upstream of it gets gradient through it.
    Fix: compile the kernel with its backward, or keep it off the tape.

WT308 backward-side-effect (error)
    The adjoint launch of a recorded kernel writes forward (non-gradient) memory: the
    adjoint replays the forward body of called ``@wp.func`` functions, so an atomic
    counter inside one (``slot = wp.atomic_add(count, 0, 1)``) counts again in backward
    and hands out different slots, scattering adjoints to the wrong elements. Reported
    at the forward launch.
    Fix: give the function a ``@wp.func_replay`` that returns the value recorded in the
    forward pass (store the slot in an array), or compute the slots in an untaped pass.

Warp documentation: "Differentiability" (sections "Debugging Gradients", "Limitations
and Workarounds", "Custom Gradient Functions"/"Custom Replay Functions") and
``Tape.backward``.

Findings are grouped by root cause (the user line to change) with a count.
"""

from __future__ import annotations

import bisect
from collections import defaultdict

import numpy as np

from warptrace.analysis.dataflow import BackwardCall, Dataflow, Epoch, combine_codes
from warptrace.analysis.findings import Finding, Location, RuleInfo, Severity
from warptrace.analysis.model import K, KernelInfo, Model
from warptrace.kernel_source import RESULT_DISCARDED, RESULT_USED
from warptrace.trace import schema as S

DOC_DEBUG = "Differentiability > Debugging Gradients"
DOC_LIMITS = "Differentiability > Limitations and Workarounds"

RULES = (
    RuleInfo(
        code="WT301",
        name="severed-chain",
        family="flow",
        fix="allocate the array with requires_grad=True (wp.zeros(..., requires_grad=True), "
        "wp.empty_like(x, requires_grad=True))",
        doc=DOC_DEBUG,
    ),
    RuleInfo(
        code="WT302",
        name="truncated-horizon",
        family="flow",
        fix="record the whole horizon on one tape with steps + 1 distinct state buffers and per-step "
        "intermediates, and call backward once (use checkpointing if memory is the issue)",
        doc=DOC_LIMITS,
    ),
    RuleInfo(
        code="WT303",
        name="unchained-boundary",
        family="flow",
        fix="before each segment's backward, seed the .grad of every state array the segment hands "
        "to the next one with the adjoint the later segment produced for it",
        doc=DOC_LIMITS,
    ),
    RuleInfo(
        code="WT304",
        name="manual-seed",
        family="flow",
        fix="reduce to a scalar loss on the tape (with the 1/N of a mean) and call tape.backward(loss)",
        doc="Tape.backward; " + DOC_DEBUG,
    ),
    RuleInfo(
        code="WT305",
        name="objective-off-tape",
        family="flow",
        fix="record the launch that computes the objective inside `with tape:` and call "
        "tape.backward() on the scalar it writes",
        doc=DOC_DEBUG,
    ),
    RuleInfo(
        code="WT306",
        name="stale-grad-read",
        family="flow",
        fix="read the gradient after this iteration's tape.backward(), and zero it only after the "
        "parameter update",
        doc=DOC_DEBUG,
    ),
    RuleInfo(
        code="WT307",
        name="backward-disabled",
        family="flow",
        fix="compile the kernel with its backward (drop enable_backward=False from the kernel or "
        "module options), or keep it off the tape",
        doc=DOC_LIMITS,
    ),
    RuleInfo(
        code="WT308",
        name="backward-side-effect",
        family="flow",
        fix="add a @wp.func_replay to the function with the side effect that returns the value "
        "recorded in the forward pass, or compute it in an untaped pass",
        doc="Differentiability > Custom Replay Functions",
    ),
)
_INFO = {info.code: info for info in RULES}


def check(model: Model) -> list[Finding]:
    """Run WT301-WT308 over the model."""
    findings: list[Finding] = []
    findings += _wt301(model)
    findings += _wt302(model)
    findings += _wt303(model)
    findings += _wt304(model)
    findings += _wt305(model)
    findings += _wt306(model)
    findings += _wt307(model)
    findings += _wt308(model)
    return findings


def _finding(code: str, severity: Severity, message: str, location: Location, **extra) -> Finding:
    info = _INFO[code]
    return Finding(
        code=code,
        name=info.name,
        severity=severity,
        message=message,
        location=location,
        fix=info.fix,
        doc=info.doc,
        **extra,
    )


def _names(labels) -> str:
    unique = list(dict.fromkeys(label for label in labels if label))
    return ", ".join(f"`{label}`" for label in unique) or "an array"


def _label(model: Model, array_id: int) -> str:
    return model.array_label(int(array_id))


def _rows(model: Model, ev: int) -> range:
    return range(int(model.acc_start[ev]), int(model.acc_stop[ev]))


def _differentiable_dtype(dtype: str) -> bool:
    """Floating-point element types carry gradients; integers and booleans do not."""
    text = dtype.lower()
    if "int" in text or "bool" in text or text in ("int8", "uint8"):
        return False
    # vec3i, mat22b, ...: integer and boolean composites
    return not (text.startswith(("vec", "mat", "quat", "transform", "spatial")) and text[-1:] in ("i", "b"))


def _backpropagated(df: Dataflow) -> list[tuple[Epoch, BackwardCall]]:
    """Each tape epoch with a backward, and its first backward call."""
    out = []
    for epoch in df.epochs:
        if epoch.backwards and epoch.events:
            out.append((epoch, df.backward_calls[epoch.backwards[0]]))
    return out


# ---------------------------------------------------------------- WT301
def _wt301(model: Model) -> list[Finding]:
    df = model.dataflow
    findings = []
    # the objective events (sorted) of each backpropagated epoch, and the reads they make of arrays
    # that may lack a gradient at the backward: rows that cannot (no such array, a gradient buffer,
    # an integer dtype, an array that has a gradient then) are dropped in numpy
    work = [(epoch, call, sorted(df.objective_events(call))) for epoch, call in _backpropagated(df)]
    consumers = np.fromiter((ev for _, _, evs in work for ev in evs), dtype=np.int64)
    whens = np.repeat(
        np.array([call.begin_seq for _, call, _ in work], dtype=np.int64), [len(evs) for _, _, evs in work]
    )
    rows, index = df.rows_of_events(consumers)
    candidate, grad_from = _may_lack_grad(model, df)
    keep = candidate[rows] & (whens[index] < grad_from[rows])
    rows, index = rows[keep], index[keep]
    consumed = consumers[index].tolist()
    rows = rows.tolist()
    cuts = np.searchsorted(index, np.cumsum([len(evs) for _, _, evs in work]), side="left").tolist()
    start = 0
    for (epoch, call, _), stop in zip(work, cuts):
        when = call.begin_seq
        reported: set[int] = set()
        # producer write rows of arrays without grad, consumed by an objective event
        for consumer, row in zip(consumed[start:stop], rows[start:stop]):
            array_id = int(model.acc_array[row])
            info = model.arrays.get(array_id)
            if (
                info is None
                or array_id in reported
                or df.has_grad(array_id, when)
                or not _differentiable_dtype(info.dtype)
            ):
                continue
            for writer_row in df.writer_rows(row).tolist():
                if df.is_uncertain[writer_row]:
                    continue  # an unanalysable kernel may not write it at all
                producer = int(df.acc_ev[writer_row])
                if df.ev_epoch[producer] != epoch.uid and not _tape_copy(model, producer, epoch):
                    continue
                sources = _differentiable_reads(model, df, producer, when)
                if not sources:
                    continue
                leaves = df.provenance.get(producer, frozenset())
                findings.append(_severed(model, df, array_id, producer, consumer, call, sources, leaves))
                reported.add(array_id)
                break
        start = stop
    return findings


def _may_lack_grad(model: Model, df: Dataflow) -> tuple[np.ndarray, np.ndarray]:
    """Access rows that WT301 looks at: reads, not of a gradient buffer, of a known array with a
    floating-point dtype; and per row the seq from which its array always has a gradient
    (:meth:`Dataflow.has_grad` is true at every later seq; int64 max when never)."""
    never = np.iinfo(np.int64).max
    ids = [array_id for array_id in model.arrays if array_id >= 0]
    max_id = max(ids, default=-1)
    known = np.zeros(max_id + 2, dtype=bool)  # last slot: ids out of range
    since = np.full(max_id + 2, never, dtype=np.int64)
    for array_id in ids:
        info = model.arrays[array_id]
        known[array_id] = _differentiable_dtype(info.dtype)
        since[array_id] = df.grad_since(array_id, never)
    array_ids = model.acc_array
    slots = np.where((array_ids >= 0) & (array_ids <= max_id), array_ids, max_id + 1)
    mask = known[slots]
    grad_from = since[slots]
    if len(ids) < len(model.arrays):  # negative array ids: left to the exact test
        mask |= array_ids < 0
        grad_from[array_ids < 0] = never
    return mask & df.is_read & ~df.grad_row_mask, grad_from


def _tape_copy(model: Model, ev: int, epoch: Epoch) -> bool:
    """A copy inside the tape's scope that was not recorded (its destination has no grad)."""
    return (
        model.kind[ev] == K[S.COPY]
        and int(model.tape[ev]) == epoch.tape
        and model.phase[ev] == S.FORWARD
        and model.parent[ev] < 0
        and int(model.seq[epoch.events[0]]) <= int(model.seq[ev]) <= int(model.seq[epoch.events[-1]])
    )


def _differentiable_reads(model: Model, df: Dataflow, ev: int, when: int) -> list[int]:
    """Arrays with a gradient that event ``ev`` reads (its differentiable inputs)."""
    out = []
    for row in _rows(model, ev):
        if df.is_read[row] and not df.grad_row_mask[row]:
            array_id = int(model.acc_array[row])
            if df.has_grad(array_id, when):
                out.append(array_id)
    return out


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
    label = _label(model, array_id)
    site = model.allocation_site(array_id)
    location = model.location(site, "allocation")
    params = [_label(model, leaf) for leaf in sorted(leaves)] or [_label(model, s) for s in sources]
    what = "kernel `" + model.kernel_name(producer) + "`" if model.kind[producer] == K[S.LAUNCH] else "a copy"
    message = (
        f"`{label}` has no gradient (allocated without requires_grad) but carries {_names(params)} from "
        f"{what} (line {model.event_location(producer).line}) to `{model.kernel_name(consumer)}` "
        f"(line {model.event_location(consumer).line}) on the way to the loss: the adjoint stops there, "
        f"so {_names(params)} {'gets' if len(set(params)) == 1 else 'get'} no gradient through it"
    )
    return _finding(
        "WT301",
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


# ---------------------------------------------------------------- WT302
def _wt302(model: Model) -> list[Finding]:
    df = model.dataflow
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
                and not _cleared(model, df, grad_id, call_a.end_seq, call_b.begin_seq)
            ):
                summed.add(leaf)
        if not summed:
            continue
        state_labels = [_label(model, s) for s in states]
        params = [_label(model, p) for p in sorted(summed)]
        later = (
            "by the same call in a later iteration"
            if call_b.site == call_a.site
            else f"at line {model.location(call_b.site).line}"
        )
        message = (
            f"this backward covers one tape only, but the state {_names(state_labels)} it produced from "
            f"{_names(params)} is read by the next tape (line {model.event_location(readers[0]).line}), "
            f"which is backpropagated separately ({later}) while the "
            f"gradients of {_names(params)} are summed across both: every path through the carried state "
            "is dropped (a truncated horizon). If truncated backpropagation through time is intended, this "
            "is by design; otherwise use one tape over the whole horizon with distinct per-step buffers"
        )
        findings.append(
            _finding(
                "WT302",
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


def _cleared(model: Model, df: Dataflow, grad_id: int, after_seq: int, before_seq: int) -> bool:
    """Whether a gradient buffer was zeroed or overwritten in the window."""
    return df.zeroed_between(grad_id, after_seq, before_seq)


# ---------------------------------------------------------------- WT303
def _wt303(model: Model) -> list[Finding]:
    df = model.dataflow
    findings = []
    calls = df.backward_calls
    for call_a in calls[1:]:
        call_b = calls[call_a.index - 1]
        if call_b.epoch == call_a.epoch:
            continue
        epoch_a, epoch_b = df.epochs[call_a.epoch], df.epochs[call_b.epoch]
        if not epoch_a.events or not epoch_b.events:
            continue
        seeded_grads = _seeded_memory(model, df, call_a)
        if not seeded_grads:
            continue  # a hand-seeded backward is what makes a checkpoint boundary
        boundary = _boundary(model, df, epoch_a, epoch_b, call_b)
        if not boundary:
            continue
        status = {}
        for a_array, b_array in boundary:
            status[(a_array, b_array)] = _chain_state(
                model, df, a_array, b_array, call_a, call_b, seeded_grads
            )
        explicit = [pair for pair, state in status.items() if state == "seeded"]
        missing = [pair for pair, state in status.items() if state == "missing"]
        if not explicit or not missing:
            continue
        seeded_labels = [_label(model, a) for a, _ in explicit]
        missing_labels = [_label(model, a) for a, _ in missing]
        later_labels = [_label(model, b) for _, b in missing]
        seed_events = [ev for ev, _grad, _owner, _src in df.seeds(call_a) if ev != call_a.begin_ev]
        related = [model.event_location(ev, "seed") for ev in seed_events[:3]]
        related.append(model.location(call_b.site, "later segment's backward"))
        message = (
            f"this backward of a replayed segment is seeded with the adjoint of {_names(seeded_labels)} from "
            f"the later segment's backward (line {model.location(call_b.site).line}) but not with that of "
            f"{_names(missing_labels)}, which the later segment read (as {_names(later_labels)}): the gradient "
            "through it is dropped at this boundary"
        )
        findings.append(
            _finding(
                "WT303",
                Severity.ERROR,
                message,
                model.location(call_a.site, "backward"),
                related=related,
                evidence={
                    "first_seq": call_a.begin_seq,
                    "backward_seqs": [call_b.begin_seq, call_a.begin_seq],
                    "unseeded_array_ids": sorted(a for a, _ in missing),
                    "seeded_array_ids": sorted(a for a, _ in explicit),
                },
                key=(call_a.site,),
            )
        )
    return findings


def _memory_key(model: Model, array_id: int) -> tuple[int, int, int]:
    info = model.arrays.get(int(array_id))
    if info is None:
        return (-1, int(array_id), 0)
    lo, hi = info.hull
    return (info.alloc_id, lo, hi)


class _RowCodes:
    """Per access row: an int code of its memory (equal codes <=> equal :func:`_memory_key`) and
    of its argument path, so that (argument, memory) read signatures are plain ints."""

    def __init__(self, model: Model, df: Dataflow) -> None:
        self._df = df
        self._lists: tuple[list, list, list, list] | None = None
        ids = model.acc_array
        unique, inverse = np.unique(ids, return_inverse=True)
        codes: dict[tuple[int, int, int], int] = {}
        key_code = np.array(
            [codes.setdefault(_memory_key(model, a), len(codes)) for a in unique.tolist()], dtype=np.int64
        )
        self.key = key_code[inverse.reshape(-1)] if len(ids) else np.zeros(0, dtype=np.int64)
        self.n_keys = max(len(codes), 1)
        arg = np.asarray(model.acc_arg_code, dtype=np.int64)
        field = np.asarray(model.acc_field_code, dtype=np.int64)
        n_fields = int(field.max()) + 1 if len(field) else 1
        n_args = int(arg.max()) + 1 if len(arg) else 1
        if float(n_args) * n_fields * self.n_keys < 2.0**62:
            self.path = arg * n_fields + field
        else:  # python ints: no overflow
            self.path = arg.astype(object) * n_fields + field.astype(object)

    def lists(self) -> tuple[list, list, list, list]:
        """Python lists of the row memory codes, path codes, read and write flags."""
        if self._lists is None:
            self._lists = (
                self.key.tolist(),
                self.path.tolist(),
                self._df.is_read.tolist(),
                self._df.is_write.tolist(),
            )
        return self._lists

    def read_codes(self, rows: np.ndarray, keys: np.ndarray) -> np.ndarray:
        return self.path[rows] * self.n_keys + keys


def _row_codes(model: Model, df: Dataflow) -> _RowCodes:
    cached = getattr(df, "_wt303_codes", None)
    if cached is None:
        cached = df._wt303_codes = _RowCodes(model, df)
    return cached


def _boundary(
    model: Model, df: Dataflow, epoch_a: Epoch, epoch_b: Epoch, call_b: BackwardCall
) -> list[tuple[int, int]]:
    """State handed from segment A to segment B: (array A wrote, array B read) pairs of the same
    memory, or of memory the original forward wrote where A's replay wrote fresh arrays.

    Segment A's launches are matched, in order, to earlier launches of the same kernel whose
    read arguments are the same memory once A's own outputs are mapped to the originals."""
    codes = _row_codes(model, df)
    # exposed inputs of B: read before B writes them (by an earlier event); and B's objective reads
    objective_b = df.objective_events(call_b)
    evs_b = np.asarray(epoch_b.events, dtype=np.int64)
    rows, index = df.rows_of_events(evs_b)
    if len(rows) == 0:
        return []
    in_objective = np.fromiter((ev in objective_b for ev in epoch_b.events), dtype=bool, count=len(evs_b))
    keys_b = codes.key[rows]
    unique, inverse = np.unique(keys_b, return_inverse=True)
    inverse = inverse.reshape(-1)
    writes = df.is_write[rows]
    first_write = np.full(len(unique), len(evs_b), dtype=np.int64)
    np.minimum.at(first_write, inverse[writes], index[writes])
    exposed_rows = np.nonzero(df.is_read[rows] & in_objective[index] & (first_write[inverse] >= index))[0]
    if len(exposed_rows) == 0:
        return []
    slots, first = np.unique(inverse[exposed_rows], return_index=True)
    exposed = dict(zip(unique[slots].tolist(), model.acc_array[rows[exposed_rows[first]]].tolist()))
    originals, launch_reads = _original_launches(model, df)
    start_a = int(model.seq[epoch_a.events[0]])
    mapping: dict[int, int] = {}
    out_a: dict[int, int] = {}
    provenance = df.provenance
    key_l, path_l, read_l, write_l = codes.lists()
    acc_start, acc_stop = model.acc_start, model.acc_stop
    written: dict[int, list[tuple[int, int]]] = {}
    for ev in epoch_a.events:
        leaves = provenance.get(ev)
        if leaves is None:
            continue
        lo, hi = int(acc_start[ev]), int(acc_stop[ev])
        signature = launch_reads.get(ev)
        if signature is None or any(
            mapping.get(key_l[r], key_l[r]) != key_l[r] for r in range(lo, hi) if read_l[r]
        ):
            signature = tuple(
                sorted(
                    path_l[r] * codes.n_keys + mapping.get(key_l[r], key_l[r])
                    for r in range(lo, hi)
                    if read_l[r]
                )
            )
        seqs, evs = originals.get((int(model.kernel[ev]), signature), ((), ()))
        j = bisect.bisect_left(seqs, start_a)
        outputs = None
        if j > 0:
            original = evs[j - 1]
            outputs = written.get(original)
            if outputs is None:
                outputs = written[original] = [
                    (path_l[r], key_l[r])
                    for r in range(int(acc_start[original]), int(acc_stop[original]))
                    if write_l[r]
                ]
        for r in range(lo, hi):
            if not write_l[r]:
                continue
            key = key_l[r]
            if outputs:
                path = path_l[r]
                for opath, okey in outputs:
                    if opath == path:
                        mapping[key] = okey
            if leaves:
                out_a[mapping.get(key, key)] = model.acc_array[r].item()
    return [(a_array, exposed[key]) for key, a_array in out_a.items() if key in exposed]


def _original_launches(
    model: Model, df: Dataflow
) -> tuple[dict[tuple, tuple[list[int], list[int]]], dict[int, tuple[int, ...]]]:
    """(kernel, sorted read arguments as memory codes) -> (seqs, events) of the forward launches
    with them; and the sorted read codes of each such launch."""
    cached = getattr(df, "_wt303_originals", None)
    if cached is not None:
        return cached
    codes = _row_codes(model, df)
    index: dict[tuple, tuple[list[int], list[int]]] = {}
    launches = np.nonzero((model.kind == K[S.LAUNCH]) & ~model.adjoint & (model.phase == S.FORWARD))[0]
    rows, position = df.rows_of_events(launches)
    read = df.is_read[rows]
    rows, position = rows[read], position[read]
    values = codes.read_codes(rows, codes.key[rows])
    if values.dtype == object:
        order = sorted(range(len(values)), key=lambda i: (int(position[i]), values[i]))
        order = np.asarray(order, dtype=np.int64)
    else:
        order = np.lexsort((values, position))
    values = values[order].tolist()
    position = position[order]
    cuts = np.searchsorted(position, np.arange(len(launches) + 1), side="left").tolist()
    kernels = model.kernel[launches].tolist()
    seqs = model.seq[launches].tolist()
    reads_of: dict[int, tuple[int, ...]] = {}
    for i, ev in enumerate(launches.tolist()):
        signature = reads_of[ev] = tuple(values[cuts[i] : cuts[i + 1]])
        entry = index.get((int(kernels[i]), signature))
        if entry is None:
            entry = index[(int(kernels[i]), signature)] = ([], [])
        entry[0].append(int(seqs[i]))
        entry[1].append(ev)
    df._wt303_originals = (index, reads_of)
    return index, reads_of


def _seeded_memory(model: Model, df: Dataflow, call: BackwardCall) -> dict[tuple[int, int, int], int]:
    """Gradient memory given a hand seed before the call's adjoints -> seeding event."""
    out = {}
    for ev, grad_id, _owner, _from_grad in df.seeds(call):
        if grad_id >= 0:
            out[_memory_key(model, grad_id)] = ev
    return out


def _chain_state(
    model: Model,
    df: Dataflow,
    a_array: int,
    b_array: int,
    call_a: BackwardCall,
    call_b: BackwardCall,
    seeded: dict[tuple[int, int, int], int],
) -> str:
    """How the boundary array's gradient reaches segment A's backward: ``"seeded"`` (a hand seed),
    ``"chained"`` (same memory; the later backward's adjoint is still there) or ``"missing"``."""
    grad_a = df.grad_array(a_array, call_a.begin_seq)
    if grad_a < 0:
        return "missing"
    key = _memory_key(model, grad_a)
    if key in seeded:
        return "seeded"
    grad_b = df.grad_array(b_array, call_b.begin_seq)
    if (
        grad_b >= 0
        and _memory_key(model, grad_b) == key
        and df.fills(grad_a, call_b.index)
        and not _cleared(model, df, grad_a, call_b.end_seq, call_a.begin_seq)
    ):
        return "chained"
    return "missing"


# ---------------------------------------------------------------- WT304
def _wt304(model: Model) -> list[Finding]:
    df = model.dataflow
    findings = []
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
            label = _label(model, owner)
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
            findings.append(
                _finding(
                    "WT304",
                    Severity.WARNING,
                    message,
                    location,
                    related=related,
                    evidence={"first_seq": int(model.seq[ev]), "array_id": int(owner), "size": int(size)},
                    key=(location.file, location.line),
                )
            )
    return findings


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
        for row in _rows(model, e):
            info = model.arrays.get(int(model.acc_array[row]))
            if df.is_read[row] and info is not None and info.kind == S.ARRAY_EXTERNAL:
                return True
    return False


# ---------------------------------------------------------------- WT305
def _wt305(model: Model) -> list[Finding]:
    df = model.dataflow
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
        for row in _rows(model, ev):
            info = model.arrays.get(int(model.acc_array[row]))
            written = df.is_write[row] and not df.grad_row_mask[row] and not df.is_uncertain[row]
            if written and info is not None and info.size == 1 and _differentiable_dtype(info.dtype):
                scalars.append(int(model.acc_array[row]))
        if not scalars:
            continue
        # taped outputs it reads, per epoch
        taped: dict[int, list[int]] = defaultdict(list)
        for row in _rows(model, ev):
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
            finding = _off_tape(model, df, ev, scalars, inputs, call)
            if finding is not None:
                findings.append(finding)
                break
    return findings


def _off_tape(
    model: Model, df: Dataflow, ev: int, scalars: list[int], inputs: list[int], call: BackwardCall
) -> Finding | None:
    seq = int(model.seq[ev])
    scalar_keys = {_memory_key(model, s) for s in scalars}
    objective = scalars[0]
    why = ""
    if call.loss >= 0 and _memory_key(model, call.loss) in scalar_keys:
        why = (
            f"`tape.backward({_label(model, call.loss)})` (line {model.location(call.site).line}) seeds a scalar "
            "no recorded launch wrote, so no gradient reaches the tape"
        )
    elif call.loss >= 0 and _memory_key(model, call.loss) in {_memory_key(model, a) for a in inputs}:
        others = [
            a
            for a in _differentiable_reads(model, df, ev, call.begin_seq)
            if _memory_key(model, a) != _memory_key(model, call.loss)
        ]
        if others or any(df.has_grad(s, call.begin_seq) for s in scalars):
            why = (
                f"the backward (line {model.location(call.site).line}) is seeded on the taped partial result "
                f"`{_label(model, call.loss)}` and misses what this launch adds"
                + (f" ({_names(_label(model, a) for a in others)})" if others else "")
            )
    elif call.loss < 0:
        seeded = {_memory_key(model, owner) for _, _, owner, _ in df.seeds(call) if owner >= 0}
        reads = [r for s in scalars for r in df.reads_between(s, seq, call.begin_seq).tolist()]
        from_seeded = bool(seeded & {_memory_key(model, a) for a in inputs})
        if from_seeded and any(model.kind[df.acc_ev[r]] == K[S.VALUE_READ] for r in reads):
            why = (
                f"the objective is read back while the backward (line {model.location(call.site).line}) is "
                "seeded by hand on taped outputs"
            )
    if not why:
        return None
    message = (
        f"the objective `{_label(model, objective)}` is computed by `{model.kernel_name(ev)}`, which is not "
        f"recorded on the tape, from taped outputs {_names(_label(model, a) for a in inputs)}: {why}"
    )
    return _finding(
        "WT305",
        Severity.ERROR,
        message,
        model.event_location(ev, "untaped launch"),
        related=[model.location(call.site, "backward")],
        evidence={"first_seq": seq, "launch_seq": seq, "objective_array_id": int(objective)},
        key=(int(model.site[ev]),),
    )


# ---------------------------------------------------------------- WT306
def _wt306(model: Model) -> list[Finding]:
    df = model.dataflow
    findings = []
    grad_rows = np.nonzero(df.grad_row_mask & df.is_read & (model.phase[df.acc_ev] == S.FORWARD))[0]
    reads = [
        row
        for row in grad_rows.tolist()
        if model.kind[df.acc_ev[row]] in (K[S.VALUE_READ], K[S.COPY])
        and int(df.ev_backward[df.acc_ev[row]]) < 0
        and model.parent[df.acc_ev[row]] < 0
    ]
    for row in reads:
        ev = int(df.acc_ev[row])
        seq = int(model.seq[ev])
        grad_id = int(model.acc_array[row])
        owner = df.owner_of(grad_id)
        if owner < 0:
            continue
        before = df.fills_before(grad_id, seq)
        since = df.backward_calls[before[-1]].end_seq if before else -1
        zeroed = _cleared(model, df, grad_id, since, seq)
        updated = _first_update(model, df, owner, since, seq) >= 0
        if before and not zeroed and not updated:
            continue  # holds the gradient of the current parameters
        update = _first_update(model, df, owner, seq, None)
        if update < 0:
            continue
        update_seq = int(model.seq[update])
        if _fresh_read(model, df, grad_id, seq, update):
            continue
        uses = _update_uses(model, df, ev, update)
        severity = Severity.ERROR if uses else Severity.WARNING
        label = _label(model, owner)
        filled = df.fills_before(grad_id, update_seq)
        after = [df.backward_calls[filled[len(before)]]] if len(filled) > len(before) else []
        if before and zeroed:
            state = "after it was zeroed, so it holds zeros"
        else:
            where = f" (line {model.location(after[0].site).line})" if after else ""
            state = f"before this iteration's backward{where} fills it, so it holds the previous iterate's gradient"
            state += " (zeros the first time)" if not before else ""
        message = (
            f"`{label}.grad` is read {state}; `{label}` is then updated (line "
            f"{model.event_location(update).line}) with no fresh read of its gradient: the optimizer "
            "steps with a stale gradient"
        )
        findings.append(
            _finding(
                "WT306",
                severity,
                message,
                model.event_location(ev, "read"),
                related=[model.event_location(update, "parameter update")]
                + ([model.location(after[0].site, "backward")] if after else []),
                evidence={
                    "first_seq": seq,
                    "read_seq": seq,
                    "update_seq": update_seq,
                    "grad_array_id": grad_id,
                },
                key=(int(model.site[ev]),),
            )
        )
    return findings


def _first_update(model: Model, df: Dataflow, owner: int, after_seq: int, before_seq: int | None) -> int:
    """First write to the owner's memory in the window made outside tape recording (an optimizer
    step, an assign), or -1."""
    for row in df.iter_writes(owner, after_seq, before_seq):
        ev = int(df.acc_ev[row])
        if (
            model.recorded[ev]
            or model.phase[ev] != S.FORWARD
            or model.parent[ev] >= 0
            or df.grad_row_mask[row]
        ):
            continue
        return ev
    return -1


def _fresh_read(model: Model, df: Dataflow, grad_id: int, seq: int, update: int) -> bool:
    """Whether the gradient is read again, holding a current gradient, before (or by) the update."""
    update_seq = int(model.seq[update])
    for row in df.iter_reads(grad_id, seq, update_seq + 1):
        ev = int(df.acc_ev[row])
        if model.phase[ev] != S.FORWARD or int(df.ev_backward[ev]) >= 0:
            continue
        read_seq = int(model.seq[ev])
        before = df.fills_before(grad_id, read_seq)
        if before and not _cleared(model, df, grad_id, df.backward_calls[before[-1]].end_seq, read_seq):
            return True
    return False


def _update_uses(model: Model, df: Dataflow, read_ev: int, update: int) -> bool:
    """Whether the update consumes the read: it reads what the read copied, or it writes values
    the host computed after the read (a copy from an array created after it)."""
    for row in _rows(model, update):
        if not df.is_read[row]:
            continue
        for writer in df.writer_rows(row).tolist():
            if int(df.acc_ev[writer]) == read_ev:
                return True
        info = model.arrays.get(int(model.acc_array[row]))
        if (
            model.kind[update] == K[S.COPY]
            and info is not None
            and info.kind == S.ARRAY_EXTERNAL
            and info.seq >= int(model.seq[read_ev])
        ):
            return True
    return False


# ---------------------------------------------------------------- WT307
def _wt307(model: Model) -> list[Finding]:
    df = model.dataflow
    disabled = {k for k, kernel in model.kernels.items() if not kernel.enable_backward}
    if not disabled:
        return []
    findings = []
    for _epoch, call in _backpropagated(df):
        objective = df.objective_events(call)
        for ev in sorted(objective):
            if int(model.kernel[ev]) not in disabled or model.kind[ev] != K[S.LAUNCH]:
                continue
            inputs = _differentiable_reads(model, df, ev, call.begin_seq)
            leaves = df.provenance.get(ev, frozenset())
            if not inputs and not leaves:
                continue
            kernel = model.kernels[int(model.kernel[ev])]
            params = [_label(model, p) for p in sorted(leaves)] or [_label(model, a) for a in inputs]
            message = (
                f"`{kernel.key}` is compiled with enable_backward=False (kernel or module option) but is recorded "
                f"on a tape that is backpropagated (line {model.location(call.site).line}), between "
                f"{_names(params)} and the loss: Warp skips its adjoint, so no gradient flows through it"
            )
            findings.append(
                _finding(
                    "WT307",
                    Severity.ERROR,
                    message,
                    model.event_location(ev, "launch"),
                    related=[
                        Location(kernel.file, kernel.line, "kernel", "", kernel.key),
                        model.location(call.site, "backward"),
                    ],
                    evidence={"first_seq": int(model.seq[ev]), "launch_seq": int(model.seq[ev])},
                    key=(int(model.site[ev]), kernel.kernel_id),
                )
            )
    return findings


# ---------------------------------------------------------------- WT308
def _wt308(model: Model) -> list[Finding]:
    df = model.dataflow
    adjoints = np.nonzero((model.kind == K[S.LAUNCH]) & model.adjoint)[0]
    findings = []
    pending: dict[int, dict[tuple, list[int]]] = {}
    for ev in _replaying_adjoints(model, df, adjoints).tolist():
        side = [
            row
            for row in _rows(model, ev)
            if df.is_write[row] and not df.grad_row_mask[row] and not df.is_uncertain[row]
        ]
        if not side:
            continue
        kernel = model.kernels.get(int(model.kernel[ev]))
        if kernel is None:
            continue
        call_index = int(df.ev_backward[ev])
        if call_index < 0:
            continue
        call = df.backward_calls[call_index]
        side = [
            row
            for row in side
            if (mode := _replayed_write(kernel, model.acc_arg[row], model.acc_field[row])) == RESULT_USED
            or (mode == RESULT_DISCARDED and _read_by_later_adjoint(model, df, row, ev, call))
        ]
        if not side:
            continue
        forward = _match_forward(model, df, ev, call, pending)
        if forward < 0:
            continue
        labels = [_label(model, int(model.acc_array[row])) for row in side]
        related = [model.location(call.site, "backward")]
        for row in side:
            arg = kernel.arg(model.acc_arg[row], model.acc_field[row])
            if arg is not None and arg.write_line >= 0:
                text = kernel.source_model.kernel_line_text(arg.write_line) or ""
                related.append(Location(kernel.file, arg.write_line, "kernel write", text, kernel.key))
        message = (
            f"the adjoint of `{kernel.key}` writes forward memory {_names(labels)} during the backward "
            f"(line {model.location(call.site).line}): the backward replays the forward body of the @wp.func "
            "that updates it, so the side effect (an atomic counter) runs again and later adjoint reads see "
            "different values than the forward did"
        )
        findings.append(
            _finding(
                "WT308",
                Severity.ERROR,
                message,
                model.event_location(forward, "forward launch"),
                related=related,
                evidence={"first_seq": int(model.seq[forward]), "adjoint_seq": int(model.seq[ev])},
                key=(int(model.site[forward]), kernel.kernel_id),
            )
        )
    return findings


def _replaying_adjoints(model: Model, df: Dataflow, adjoints: np.ndarray) -> np.ndarray:
    """The adjoint launches among ``adjoints`` with a certain write to forward memory that the
    adjoint replays (:func:`_replayed_write`; a known kernel), in order: the only ones WT308 checks."""
    rows, index = df.rows_of_events(adjoints)
    side = df.is_write[rows] & ~df.grad_row_mask[rows] & ~df.is_uncertain[rows]
    rows, index = rows[side], index[side]
    kernels = model.kernel[adjoints[index]]
    _, kernel_codes = np.unique(kernels, return_inverse=True)
    codes = combine_codes([kernel_codes.reshape(-1), model.acc_arg_code[rows], model.acc_field_code[rows]])
    unique, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    replayed = np.zeros(len(unique), dtype=bool)
    for i, row in enumerate(rows[first].tolist()):
        kernel = model.kernels.get(int(kernels[first[i]]))
        replayed[i] = kernel is not None and _replayed_write(kernel, model.acc_arg[row], model.acc_field[row])
    return adjoints[np.unique(index[replayed[inverse.reshape(-1)]])]


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
    arrays = sorted({int(model.acc_array[row]) for row in _rows(model, ev) if not df.grad_row_mask[row]})
    return (int(model.kernel[ev]), tuple(arrays))


def _replayed_write(kernel: KernelInfo, arg: str, field_path: str) -> int:
    """Whether the adjoint of ``kernel`` really rewrites ``arg``: it is passed to a user function
    (replayed in full by the adjoint) that has no custom replay. Atomics written directly in the
    kernel body are not replayed. When the kernel uses the function's result (``slot = f(count)``)
    the replay hands out different values than the forward did: the counter pattern. Unknown
    source: trust the recorder."""
    target = arg + ("." + field_path if field_path else "")
    return kernel.source_model.passes_to_function(target, tuple(kernel.custom_replay))


def _read_by_later_adjoint(model: Model, df: Dataflow, row: int, ev: int, call: BackwardCall) -> bool:
    """Whether a later adjoint launch of the same backward reads the forward memory the replayed
    accumulation at access ``row`` (of adjoint ``ev``) changed: only then does it alter a gradient."""
    array_id = int(model.acc_array[row])
    for read_row in df.reads_between(array_id, int(model.seq[ev]), call.end_seq).tolist():
        if model.adjoint[int(df.acc_ev[read_row])]:
            return True
    return False
