"""A gradient read or stepped that no backward can reach (WT310).

Findings are grouped per array (its allocation), with the number of gradient reads.

WT310 unreached-parameter
    Summary: a gradient is read (or an optimizer steps an array) that no backward can reach
    Severity: error
    Proves:
        The program reads the gradient of an array (``p.grad.numpy()``, a copy of it, an
        optimizer step that reads it) after one or more ``tape.backward()`` calls, and none of
        those backward calls can reach the array: no launch or copy recorded on a
        backpropagated tape reads it on the way to the loss, directly or through memory
        computed from it, and no adjoint wrote its gradient. The gradient is zero by
        construction, whatever the values, and the optimizer never moves the array. No
        ``--check-numerics`` is needed: the trace proves it.
    Mechanism:
        A backward writes only the gradients of arrays its recorded launches read. Typical
        causes, each named in the message: **a copy taken for a view**: ``wp.array(x,
        dtype=wp.float32)`` (or ``clone``, ``to``, ``contiguous`` on a non-contiguous array)
        makes new memory; the tape reads ``x`` and the backward fills ``x.grad``, while the
        optimizer steps the copy (reported at the copy). **A library's default object**: the
        program fills its own control (or any input object) from the parameters, then passes
        ``None`` to a solver that builds a default one: the parameters feed memory that
        nothing on the tape reads. **Reads no gradient flows through**: the array reaches the
        loss only through queries of a ``wp.Mesh``/``wp.Bvh``/``wp.Volume`` handle
        (``wp.mesh_query_point``, ``wp.mesh_eval_position``, ...), which Warp differentiates
        with respect to the query point only, never the handle's arrays.
    Evidence:
        The gradient read (a value read or copy of the gradient allocation, or an optimizer
        launch reading it) after backward events, and the def-use graph of the backpropagated
        tapes: no recorded read of the array's memory or of memory derived from it reaches
        the loss; handle queries are recorded as reads that carry no gradient.
    Example: wt310_copy_not_view
    Fix:
        Hand the optimizer (or the gradient read) the array the tape reads (a view such as
        ``x.flatten()``, or ``x`` itself), or pass the object filled from the parameters to
        the code the tape records (for a library: your own control object, not ``None``).
    Silent on:
        A gradient read before any backward (WT306 says whether it is stale); an array that
        reaches the loss but whose gradient is legitimately zero there (a flat region, a
        piecewise-constant step); an array cut off by a missing ``requires_grad`` or an
        unrecorded launch on its way (WT301, WT309, WT503 name the cut); backward calls seeded
        by hand (an adjoint launched by the program, a copy into a ``.grad``: the seeds may be
        more than the trace shows) and tapes holding custom ``record_func`` callbacks (they may
        write any gradient); a gradient the program wrote itself before reading it (an adjoint
        it launched, ``adjoint=True``, or a copy into ``.grad``); the gradient of a seeded
        output; an array read only by a launch whose output keeps its gradient
        (``retain_grad=True``: Warp passes it to every write); traces recorded before
        schema 6, whose reads through mesh/BVH/volume handles were not recorded.
    Look-alikes: ok_flow_param_flat, ok_mem_mesh_constant, ok_flow_grad_by_hand
    Warp documentation:
        "Differentiability", sections "Debugging Gradients" and "Limitations and Workarounds".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from warptrace.analysis.dataflow import BackwardCall, Dataflow, dataflow_of
from warptrace.analysis.findings import Finding, Location, RuleInfo, Severity
from warptrace.analysis.model import K, Model
from warptrace.analysis.rules.common import DOC_DEBUG, Rule, access_rows, array_label, finding, quote, shared
from warptrace.analysis.windows import unrecorded_before
from warptrace.trace import schema as S

WT310 = RuleInfo(
    code="WT310",
    name="unreached-parameter",
    family="flow",
    fix="hand the optimizer (or the gradient read) the array the tape reads, or pass the object you "
    "filled from it to the code the tape records (for a library: your own control/input object, not "
    "None, which makes the library build a default one)",
    doc=DOC_DEBUG,
)
_COPY_FIX = (
    "use a view of the array the tape reads (x.flatten(), x.reshape(...), x[i:j]) or hand the optimizer x "
    "itself; wp.array(x, dtype=...), x.clone() and x.contiguous() make copies"
)
_HANDLE_FIX = (
    "read the handle's array elements directly (wp.mesh_get(mesh_id).points[i] is differentiated "
    "with respect to the points), or give the query a custom adjoint"
)

Memory = tuple[int, int, int]  # (allocation, first byte, end byte)


@dataclass
class _Reach:
    """What the backward calls before a gradient read did with the array's memory."""

    read_on_tape: int = -1  # a recorded forward event of a backpropagated epoch that read it
    through_query: bool = False  # reaches the loss if reads that carry no gradient counted
    query: int = -1  # then: an objective event reading through a handle query (no gradient flows)
    # a recording schedule left out the steps before the window, and the gradient was not cleared
    # in it before these backward calls: one of those steps may have filled it (info: not recorded)
    unrecorded: bool = False


def check(model: Model) -> list[Finding]:
    return [_finding(model, dataflow_of(model), *found) for found in unreached(model)]


def unreached(model: Model) -> list[tuple[int, list[int], list[BackwardCall], _Reach]]:
    """(array, its gradient-read rows, the backward calls before the first read, what they did
    with it) per array no backward reaches; computed once per model (WT306 skips these reads)."""
    return shared(model, "unreached_parameters", _unreached)


def _unreached(model: Model) -> list[tuple[int, list[int], list[BackwardCall], _Reach]]:
    if int(model.meta.get("schema_version", S.SCHEMA_VERSION)) < 6:
        return []  # before schema 6 the reads through mesh/BVH/volume handles were not recorded
    df = dataflow_of(model)
    calls = [call for call in df.backward_calls if call.end_seq >= 0]
    if not calls:
        return []
    reads = _gradient_reads(model, df)
    if not len(reads):
        return []
    first_end = min(call.end_seq for call in calls)
    by_owner: dict[int, list[int]] = {}
    for row in reads.tolist():
        if int(model.seq[df.acc_ev[row]]) <= first_end:
            continue  # no backward ran yet: WT306's question
        owner = df.owner_of(int(model.acc_array[row]))
        if owner >= 0:
            by_owner.setdefault(owner, []).append(row)
    written = _written_by_hand(model, df)
    found = []
    for owner, rows in by_owner.items():
        first_seq = int(model.seq[df.acc_ev[rows[0]]])
        before = [call for call in calls if call.end_seq < first_seq]
        if (
            not before
            or written.get(owner, first_seq) < first_seq
            or any(owner == call.loss or owner in call.grads for call in before)  # a seed
            or _custom_callbacks(model, df, before)
            or any(_hand_seeded(model, df, c) for c in before)
        ):
            continue
        reach = _reach(model, df, owner, before)
        if reach is not None:  # None: some backward reaches it (or another rule's cut explains the zero)
            edge = unrecorded_before(model)
            reach.unrecorded = edge >= 0 and not _cleared_in_window(
                model, df, owner, edge, before[0].begin_seq
            )
            found.append((owner, rows, before, reach))
    return found


def _cleared_in_window(model: Model, df: Dataflow, owner: int, edge: int, before_seq: int) -> bool:
    """A recording schedule left the steps before this window (from seq ``edge``) out: whether the
    array's gradient was allocated or written in the window before ``before_seq`` (a backward of
    an unrecorded step cannot have left anything in it then)."""
    grads = [info for info in model.arrays.values() if info.grad_of == owner and info.alloc_id >= 0]
    if any(info.seq >= edge for info in grads):
        return True
    allocs = np.array(sorted({info.alloc_id for info in grads}), dtype=np.int64)
    if not allocs.size:
        return False
    rows = np.nonzero(df.is_write & np.isin(model.acc_alloc, allocs))[0]
    seqs = model.seq[df.acc_ev[rows]]
    return bool(((seqs >= edge) & (seqs < before_seq)).any())


def _gradient_reads(model: Model, df: Dataflow) -> np.ndarray:
    """Rows reading a gradient buffer outside any backward: value reads, copies, untaped launches
    (an optimizer's step)."""
    rows = np.nonzero(df.grad_row_mask & df.is_read)[0]
    evs = df.acc_ev[rows]
    keep = (model.phase[evs] == S.FORWARD) & (df.ev_backward[evs] < 0) & (model.parent[evs] < 0)
    keep &= ~model.adjoint[evs]
    kinds = model.kind[evs]
    keep &= (
        (kinds == K[S.VALUE_READ]) | (kinds == K[S.COPY]) | ((kinds == K[S.LAUNCH]) & ~model.recorded[evs])
    )
    return rows[keep]


def _written_by_hand(model: Model, df: Dataflow) -> dict[int, int]:
    """Per array, the first seq at which something outside a backward wrote its gradient with
    values: a copy into ``.grad``, a non-zero fill, or an adjoint launched by the program
    (``wp.launch(..., adjoint=True)`` adds into the ``.grad`` of its array arguments, which its
    access rows name by the arrays themselves). A gradient read after it holds what that wrote,
    not a zero by construction."""
    first: dict[int, int] = {}

    def note(owner: int, ev: int) -> None:
        seq = int(model.seq[ev])
        if owner >= 0 and seq < first.get(owner, seq + 1):
            first[owner] = seq

    rows = np.nonzero(df.grad_row_mask & df.is_write)[0]
    evs = df.acc_ev[rows]
    keep = (df.ev_backward[evs] < 0) & (model.parent[evs] < 0)
    keep &= ~((model.kind[evs] == K[S.MEMSET]) & (model.value[evs] == 0.0))  # clears, not values
    for row, ev in zip(rows[keep].tolist(), evs[keep].tolist()):
        note(df.owner_of(int(model.acc_array[row])), ev)
    adjoint = model.adjoint[df.acc_ev] & (df.ev_backward[df.acc_ev] < 0) & (model.parent[df.acc_ev] < 0)
    for row in np.nonzero(adjoint & ~df.grad_row_mask)[0].tolist():
        note(int(model.acc_array[row]), int(df.acc_ev[row]))
    return first


def _custom_callbacks(model: Model, df: Dataflow, calls: list[BackwardCall]) -> bool:
    """Whether a tape replayed by ``calls`` holds a ``record_func`` callback of the program's
    own (Warp's copy adjoints are recorded under their copy: a parent)."""
    epochs = {call.epoch for call in calls}
    evs = np.nonzero((model.kind == K[S.RECORD_FUNC]) & (model.parent < 0))[0]
    return any(int(df.ev_epoch[ev]) in epochs for ev in evs.tolist())


def _hand_seeded(model: Model, df: Dataflow, call: BackwardCall) -> bool:
    """Whether gradient buffers were written by hand before the call (an adjoint launched by the
    program, a copy into a ``.grad``, a non-zero fill), or the call has nothing the slice starts
    from: the seeds may be more than the dataflow knows, so no claim is made about it."""
    if not len(df.objective_arrays_many([call])[0]):
        return True
    epoch = df.epochs[call.epoch]
    start = int(model.seq[epoch.events[0]]) if epoch.events else call.begin_seq
    rows = np.nonzero(df.grad_row_mask & df.is_write)[0]
    evs = df.acc_ev[rows]
    seqs = model.seq[evs]
    window = (
        (seqs >= start)
        & (seqs < call.begin_seq)
        & (model.phase[evs] == S.FORWARD)
        & (df.ev_backward[evs] < 0)
        & (model.parent[evs] < 0)  # (not the gradient copy Warp nests in a copy: wp.clone(x) copies x.grad)
    )
    for ev in np.unique(evs[window]).tolist():
        if model.kind[ev] == K[S.MEMSET] and model.value[ev] == 0.0:
            continue  # tape.zero(), zero_(): clears, does not seed
        return True
    return False


def _memory(model: Model, array_id: int) -> Memory | None:
    info = model.arrays.get(int(array_id))
    if info is None or info.alloc_id < 0:
        return None
    lo, hi = info.hull
    return (info.alloc_id, lo, hi)


def _row_memory(model: Model, df: Dataflow, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lo, hi = df.hulls(rows)
    return model.acc_alloc[rows], lo, hi


def _overlaps(memory: Memory, alloc: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return (alloc == memory[0]) & (lo < memory[2]) & (memory[1] < hi)


def _same_bytes(a: Memory, b: Memory) -> bool:
    return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


def _reach(model: Model, df: Dataflow, owner: int, calls: list[BackwardCall]) -> _Reach | None:
    """None when a backward call reaches the array (its values flow to the loss through recorded
    events, by reads that carry a gradient) or when something other than the tape explains the
    zero; else what the tapes did with it."""
    memory = _memory(model, owner)
    if memory is None:
        return None
    reach = _Reach()
    for call, objective in zip(calls, df.objective_arrays_many(calls)):
        if not len(objective):
            continue
        rows, index = df.rows_of_events(objective)
        alloc, lo, hi = _row_memory(model, df, rows)
        reads = df.is_read[rows] & ~df.grad_row_mask[rows]
        no_grad = (model.acc_flags[rows] & S.FLAG_NO_GRAD) != 0
        hits = reads & _overlaps(memory, alloc, lo, hi)
        if not hits.any():
            continue
        if reach.read_on_tape < 0:
            reach.read_on_tape = int(objective[index[np.argmax(hits)]])
        # read by an event the loss depends on: reached, unless only through reads that carry no
        # gradient (handle queries) on every way to the loss
        if not no_grad.any() or _reaches_loss(
            model, df, call, objective, rows, index, memory, skip_no_grad=True
        ):
            return None
        reach.through_query = True
        if reach.query < 0:
            reach.query = int(objective[index[np.argmax(no_grad & df.is_read[rows])]])
    if reach.through_query:
        return reach
    if _flows_into_objective(model, df, owner, calls):
        return None  # carried onto the tape another way (an unrecorded launch, a host round trip)
    if reach.read_on_tape < 0:
        reach.read_on_tape = _recorded_reader(model, df, owner, calls)
    if reach.read_on_tape >= 0 and _writes_retained(model, df, reach.read_on_tape):
        return None  # Warp keeps a retain_grad array's gradient across its overwrites: reached
    return reach


def _writes_retained(model: Model, df: Dataflow, ev: int) -> bool:
    """Whether event ``ev`` writes an array created with ``retain_grad=True``: Warp does not
    zero such a gradient when a later launch overwrites the array, so the adjoint of ``ev``
    still receives it (the dataflow's "an overwritten value is dead" does not hold)."""
    rows, _ = df.rows_of_events(np.array([ev], dtype=np.int64))
    for row in rows[df.is_write[rows] & ~df.grad_row_mask[rows]].tolist():
        info = model.arrays.get(int(model.acc_array[row]))
        if info is not None and info.retain_grad:
            return True
    return False


def _reaches_loss(model: Model, df: Dataflow, call: BackwardCall, objective: np.ndarray, rows: np.ndarray,
                  index: np.ndarray, memory: Memory, skip_no_grad: bool) -> bool:  # fmt: skip
    """Forward closure from ``memory`` over the call's objective events (in time order), through
    reads (that carry a gradient, with ``skip_no_grad``): does it reach what the backward seeds?"""
    targets = [call.loss] if call.loss >= 0 else []
    targets += [owner for _, _, owner, _ in df.seeds(call) if owner >= 0]
    target_memory = [m for m in (_memory(model, t) for t in targets) if m is not None]
    if not target_memory:
        return True  # nothing to compare with: say reached (no finding)
    alloc, lo, hi = _row_memory(model, df, rows)
    reads = df.is_read[rows] & ~df.grad_row_mask[rows]
    if skip_no_grad:
        reads &= (model.acc_flags[rows] & S.FLAG_NO_GRAD) == 0
    writes = df.is_write[rows] & ~df.grad_row_mask[rows]
    live: list[Memory] = [memory]
    for position in range(len(objective)):
        mine = index == position
        read_mask = mine & reads
        if not any(_overlaps(m, alloc, lo, hi)[read_mask].any() for m in live):
            continue
        for row in np.nonzero(mine & writes)[0].tolist():
            written = (int(alloc[row]), int(lo[row]), int(hi[row]))
            if any(_same_bytes(t, written) for t in target_memory):
                return True
            live.append(written)
    return False


def _read_by_objective(model: Model, df: Dataflow, array_id: int, calls: list[BackwardCall]) -> bool:
    """Whether an event the loss depends on reads the array itself, by a read that carries a gradient."""
    memory = _memory(model, array_id)
    if memory is None:
        return False
    for objective in df.objective_arrays_many(calls):
        rows, _ = df.rows_of_events(objective)
        rows = rows[
            df.is_read[rows] & ~df.grad_row_mask[rows] & ((model.acc_flags[rows] & S.FLAG_NO_GRAD) == 0)
        ]
        if _overlaps(memory, *_row_memory(model, df, rows)).any():
            return True
    return False


_CLOSURE_LIMIT = 200_000  # events a forward closure may walk before giving up (no finding then)


def _flows_into_objective(model: Model, df: Dataflow, owner: int, calls: list[BackwardCall]) -> bool:
    """Whether the array's values reach memory that an objective event of ``calls`` reads, along
    any forward events (recorded or not: an unrecorded launch, a copy through the host): then the
    zero is a cut on the way (WT309, WT301, WT103 name it), not an array the tapes never read.
    Also True when the closure is too long to walk (no claim made)."""
    objective = np.unique(np.concatenate(df.objective_arrays_many(calls)))
    obj_rows, _ = df.rows_of_events(objective)
    obj_rows = obj_rows[df.is_read[obj_rows] & ~df.grad_row_mask[obj_rows]]
    o_alloc, o_lo, o_hi = _row_memory(model, df, obj_rows)
    memory = _memory(model, owner)
    if memory is None:
        return True
    last = max(call.begin_seq for call in calls)
    first_read = next(df.iter_reads(owner, -1, last), None)
    if first_read is None:
        return False
    first_ev = int(df.acc_ev[first_read])
    stop = int(np.searchsorted(model.seq, last, side="left"))
    if stop - first_ev > _CLOSURE_LIMIT:
        return True
    live = [memory]
    for ev in range(first_ev, stop):
        if model.phase[ev] != S.FORWARD or model.adjoint[ev]:
            continue
        rows = np.arange(int(model.acc_start[ev]), int(model.acc_stop[ev]))
        if not len(rows):
            continue
        alloc, lo, hi = _row_memory(model, df, rows)
        reads = df.is_read[rows] & ~df.grad_row_mask[rows]
        if not any(_overlaps(m, alloc, lo, hi)[reads].any() for m in live):
            continue
        for i in np.nonzero(df.is_write[rows] & ~df.grad_row_mask[rows])[0].tolist():
            written = (int(alloc[i]), int(lo[i]), int(hi[i]))
            if _overlaps(written, o_alloc, o_lo, o_hi).any():
                return True
            live.append(written)
    return False


def _recorded_reader(model: Model, df: Dataflow, owner: int, calls: list[BackwardCall]) -> int:
    """A recorded forward event of a backpropagated epoch that read the array, or -1."""
    epochs = {call.epoch for call in calls}
    last = max(call.begin_seq for call in calls)
    for row in df.iter_reads(owner, -1, last):
        ev = int(df.acc_ev[row])
        if model.recorded[ev] and model.phase[ev] == S.FORWARD and int(df.ev_epoch[ev]) in epochs:
            return ev
    return -1


def _written_names(model: Model, df: Dataflow, ev: int) -> str:
    names = [quote(_name(model, int(model.acc_array[row])))
             for row in access_rows(model, ev) if df.is_write[row] and not df.grad_row_mask[row]]  # fmt: skip
    return ", ".join(dict.fromkeys(names))


def _last_write(model: Model, df: Dataflow, owner: int, before_seq: int) -> int:
    """The last forward event writing the array's memory before ``before_seq`` (-1: none since it
    was allocated)."""
    last = -1
    for row in df.iter_writes(owner, -1, before_seq):
        ev = int(df.acc_ev[row])
        if model.phase[ev] == S.FORWARD and not df.grad_row_mask[row]:
            last = ev
    return last


def _copy_source(model: Model, df: Dataflow, ev: int) -> int:
    """The source array of a copy event, or -1."""
    if ev < 0 or model.kind[ev] != K[S.COPY]:
        return -1
    for row in access_rows(model, ev):
        if df.is_read[row] and not df.grad_row_mask[row]:
            return int(model.acc_array[row])
    return -1


def _name(model: Model, array_id: int) -> str:
    """The array's label, else a label of another object over its memory (a temporary view of a
    named array), else array#id."""
    label = array_label(model, array_id)
    if label.startswith("array#"):
        label = next(iter(model.aliases([array_id])), label)
    return label


def _finding(model: Model, df: Dataflow, owner: int, rows: list[int], calls: list[BackwardCall],
             reach: _Reach) -> Finding:  # fmt: skip
    name = _name(model, owner)
    label, grad = quote(name), quote(name + ".grad")
    read_ev = int(df.acc_ev[rows[0]])
    read_at = model.event_location(read_ev, "gradient read")
    backward = calls[-1]
    backward_at = model.location(backward.site, "backward")
    how = "the optimizer steps it with" if model.kind[read_ev] == K[S.LAUNCH] else "the program reads"
    write_ev = _last_write(model, df, owner, calls[0].begin_seq)
    location = (
        model.event_location(write_ev, "last write")
        if write_ev >= 0
        else model.location(model.allocation_site(owner), "allocation")
    )
    related: list[Location] = []
    fix = WT310.fix
    source = _copy_source(model, df, write_ev)
    if source >= 0 and _read_by_objective(model, df, source, calls):
        other_name = _name(model, source)
        other = quote(other_name)
        message = (
            f"{label} is a copy of {other}, not a view: the call on line {location.line} made new memory. "
            f"The tape reads {other} and the backward (line {backward_at.line}) fills {quote(other_name + '.grad')}, "
            f"never {grad}, which {how} (line {read_at.line}): it is zero by construction"
        )
        fix = _COPY_FIX
    elif reach.through_query:
        query = f" in kernel `{model.kernel_name(reach.query)}`" if reach.query >= 0 else ""
        if reach.query >= 0:
            related.append(model.event_location(reach.query, "query"))
        message = (
            f"{label} reaches the loss only through queries of a mesh, BVH or volume handle{query} "
            "(wp.mesh_query_*, wp.mesh_eval_*, wp.bvh_query_*, wp.volume_sample*), which Warp differentiates "
            f"with respect to the query point, never the handle's arrays: the backward (line {backward_at.line}) "
            f"writes nothing into {grad}, which {how} (line {read_at.line}): it is zero by construction"
        )
        fix = _HANDLE_FIX
    elif reach.read_on_tape >= 0:
        reader = (
            model.kernel_name(reach.read_on_tape) if model.kind[reach.read_on_tape] == K[S.LAUNCH] else ""
        )
        by = f"kernel `{reader}`" if reader else "a recorded copy"
        into = _written_names(model, df, reach.read_on_tape)
        message = (
            f"{label} is read on the tape by {by} (line {model.event_location(reach.read_on_tape).line})"
            + (f", which writes {into}" if into else "")
            + ", but nothing the loss depends on reads that, so the backward (line "
            f"{backward_at.line}) never reaches {label}: {grad}, which {how} (line {read_at.line}), is "
            "zero by construction (an object filled from it and never passed on, e.g. None given to "
            "a solver instead, which then builds a default one)"
        )
        related.append(model.event_location(reach.read_on_tape, "read on the tape"))
    else:
        message = (
            f"no launch or copy recorded on a backpropagated tape reads {label} (nor memory computed from it), "
            f"so the backward (line {backward_at.line}) never reaches it: {grad}, which {how} (line "
            f"{read_at.line}), is zero by construction"
        )
    related += [backward_at, read_at]
    if reach.unrecorded:
        message = (
            f"not recorded: within the recorded steps, {message}; but the steps before them were not "
            f"recorded, and a backward there may have written {grad} (record from an earlier step, or the "
            "step that clears it, to decide)"
        )
    result = finding(
        WT310,
        Severity.INFO if reach.unrecorded else Severity.ERROR,
        message,
        location,
        related=related,
        count=len(rows),
        evidence={
            "first_seq": int(model.seq[read_ev]),
            "array_id": int(owner),
            "read_seqs": [int(model.seq[df.acc_ev[r]]) for r in rows[:16]],
            "backward_seq": int(backward.begin_seq),
        },
        key=(int(model.allocation_site(owner)), label),
    )
    result.fix = fix
    return result


RULE = Rule((WT310,), check)
