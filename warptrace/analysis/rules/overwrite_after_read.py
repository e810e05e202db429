"""Memory a taped launch read is written before that tape's backward (WT101, WT103, WT104).

WT101 overwrite-after-read
    Summary: memory a taped launch read is overwritten on the same tape before its backward
    Severity: error (warning when the write only accumulates into memory whose old values the
    reading kernel's adjoint needs, when ``--check-numerics`` summaries prove that every
    overwrite stored the bytes the reader saw, or when a library makes both the read and the
    overwrite on memory it returned to the program; info when the adjoint is linear in it)
    Proves:
        A launch recorded on tape T read buffer B; later, while T was still the active tape and
        before T's backward, something T recorded wrote B: a launch, a copy
        (``wp.copy``/``assign``/``clone`` onto B) or a memset (``zero_``/``fill_``). The
        backward of the reading launch then runs against the new contents, so its gradient
        is computed from values it never saw.
    Mechanism:
        ``tape.backward()`` replays the adjoint of every recorded launch, in reverse order,
        *against the current contents of memory*; nothing is snapshotted. Warp's own overwrite
        tracker (``wp.config.verify_autograd_array_access``) sees some of these cases, per array
        object and only for launches; it misses copies, memsets, views and Python rebinding.
        Typical disguises: a force or scratch buffer reused every step, two state buffers used
        in turn ("ping-pong"), a result copied back into the state, and a rebinding such as
        ``states[0] = states[-1]`` that makes two "different" states one object. On Warp >= 1.17
        a copy that writes back unchanged values still yields a right gradient; it is reported
        all the same (values are not recorded, and the first real change breaks it). When a
        library overwrites a buffer it made (a solver's work arrays kept on the solver object),
        the finding is at the user's call into the library and names the object that keeps
        the buffer.
    Evidence:
        A read access (event *i*, tape T, allocation B, offset/shape/strides) and a later write
        access to overlapping memory (event *j > i*, recorded on T) before T's
        ``backward`` event; the kernel-source model of the reading kernel says whether its
        adjoint needs the old values. The finding names both calls, the allocation line, the
        backward line and every Python label of the buffer.
    Example: wt101_pingpong
    Fix:
        Write each step's result to a new array: keep ``steps + 1`` state buffers and one buffer
        per intermediate. Reset or copy buffers only after ``tape.backward()``. For a library
        object's buffers: a fresh object (a new solver) per taped step, or the library's
        gradient-safe mode.
    Silent on:
        Accumulation that needs no old values (``x[i] += ...``, ``wp.atomic_add``, a linear read
        such as ``q[i] += dt * qd[i]``); a kernel that writes and then reads back its own
        result; a fresh array bound to the same Python name each step (new memory every
        time); writes to disjoint views of one allocation; writes after the backward (the
        optimizer step); inputs written before the recording starts. A partial copy
        (``dest_offset``/``count``) overwrites only its window.
    Look-alikes: ok_mem_after_backward, ok_mem_fresh_rebind, ok_mem_accumulate_atomic,
        ok_mem_accumulate_augassign, ok_mem_disjoint_views, ok_mem_targets_before, ok_mem_optimizer
    Warp documentation:
        "Differentiability", sections "Array Overwrites" and "Array Overwrite Tracking".

WT103 mutation-before-backward
    Summary: memory a taped launch read is changed by something the tape did not record before backward
    Severity: error (info when the reading kernel uses the values only linearly)
    Proves:
        Memory read by a launch recorded on tape T is changed before T's backward by something
        T did not record: an untaped launch (also ``record_tape=False`` and ``Launch``
        replays), a memset or copy outside the tape, a native utility, a write through another
        Python object over the same memory (``wp.array(ptr=...)``, a numpy or torch zero-copy
        view), a launch recorded on another tape, or that tape's backward.
    Mechanism:
        The same as WT101: the backward replays adjoints against current memory. Warp's
        overwrite tracker works per array object and only inside the tape, so none of these
        writes is visible to it. What decides WT101 versus WT103 is whether T recorded the
        write; a write through an alias recorded on T is WT101, and its message says which
        object aliased the memory.
    Evidence:
        A read access by a launch recorded on T, then a write access to overlapping memory by
        an event with another tape or not recorded, before T's ``backward`` event. Aliases
        resolve to one allocation because every access stores the allocation id and the view
        geometry, not the Python object.
    Example: wt103_memset
    Fix:
        Move the mutating call after ``tape.backward()``, or record it on the tape with its own
        output array.
    Silent on:
        The same writes after the backward; writes to memory no recorded launch read; the
        implicit-function idiom of Warp's FEM optimization examples: a residual launch on T
        reads the state ``x``, ``x`` is solved outside the tape, and
        ``tape.record_func(adjoint_solve, arrays=(rhs, x))`` declares the solve to T before
        the backward (the mutation is the forward of that recorded function).
    Look-alikes: ok_mem_after_backward, ok_mem_targets_before, ok_flow_host_logging
    Warp documentation:
        "Differentiability", sections "Array Overwrites" and "Array Overwrite Tracking".

WT104 struct-field-overwrite
    Summary: WT101 or WT102 through a `wp.struct` field, which Warp's tracker cannot see
    Severity: error (info when the values are used only linearly)
    Proves:
        A WT101 or WT102 where the read or the write goes through a ``@wp.struct`` field: an
        array held by a struct instance passed to a kernel is updated in place on the tape
        (``state.q[i] = ...``) after a launch read it. Reported with the field path
        (``state.q``).
    Mechanism:
        Struct-held arrays are invisible to Warp's overwrite tracker and to
        ``wp.autograd.gradcheck``; the backward replays adjoints against the updated field
        exactly as for a plain array.
    Evidence:
        The recorder expands struct arguments (recursively) into their field arrays; each
        access row carries the field path, and the kernel's read/write sets include the
        fields it (and the ``@wp.func`` callees it calls) reads and writes.
    Example: wt104_struct_inplace
    Fix:
        Give the struct a separate output array for the updated field, or a new struct instance
        per step, instead of writing the field an earlier launch read.
    Silent on:
        A struct state advanced in place whose old value is used only linearly (an explicit
        Euler step ``q[i] = q[i] + dt * v[i]``).
    Look-alikes: ok_mem_struct_accumulate
    Warp documentation:
        "Differentiability", sections "Array Overwrites" and "Array Overwrite Tracking".

How it works: only reads by forward launches count (a copy's adjoint does not need its source
values), and reads of gradient buffers are ignored. The first plain overwrite settles the read
it clobbered: later writes of that memory before the next read (a memset and then an atomic
scatter into the same buffer) are the same root cause and are not reported again. Findings
are grouped by root cause: one finding per (code, writing call,
reading launch, buffer role) with the number of occurrences, so a bug inside a 500-step loop is
one finding with ``count == 500``. The analysis is linear in the number of accesses: per
allocation, in sequence order, it keeps only the latest pending read per (tape, reading call,
kernel, view geometry).
"""

from __future__ import annotations

from collections import deque
from itertools import islice

import numpy as np

from warptrace.analysis.dataflow import Dataflow, dataflow_of
from warptrace.analysis.dataflow.base import isin_ids, unique_inverse
from warptrace.analysis.findings import Finding, Location, RuleInfo, Severity
from warptrace.analysis.model import K, Model, overlaps
from warptrace.analysis.rules.common import DOC_OVERWRITES, DOC_TRACKING, Rule, arg_path, quote, shared
from warptrace.analysis.rules.overwrite_evidence import (
    Group,
    adjoint_needs_value,
    alias_clause,
    append_loc,
    buffer_name,
    closed_row_copies,
    copy_window,
    grad_args_many,
    grouped_finding,
    how_unrecorded,
    in_place_rows,
    overlaps_window,
    read_write_masks,
    recorded_forward_launch,
    site_line,
    unchanged_and_owner_clauses,
    writer_phrase,
)
from warptrace.analysis.rules.overwrite_replays import BUCKET_LIMIT, OccurrenceLog, plan_replay_runs
from warptrace.analysis.rules.post_loss import post_loss_launches
from warptrace.trace import schema as S

WT101 = RuleInfo(
    code="WT101",
    name="overwrite-after-read",
    family="memory",
    fix="write each step's result to a new array (keep steps + 1 state buffers and one buffer per "
    "intermediate); reset or copy buffers only after tape.backward()",
    doc=DOC_OVERWRITES,
)
WT103 = RuleInfo(
    code="WT103",
    name="mutation-before-backward",
    family="memory",
    fix="move the mutating call after tape.backward(), or record it on the tape with its own output array",
    doc=DOC_TRACKING,
)
WT104 = RuleInfo(
    code="WT104",
    name="struct-field-overwrite",
    family="memory",
    fix="give the struct a separate output array for the updated field (or a new struct instance per "
    "step) instead of writing the field an earlier launch read",
    doc=DOC_TRACKING,
)

_INFOS = {info.code: info for info in (WT101, WT103, WT104)}

_WRITE_KINDS = (S.LAUNCH, S.CMD_LAUNCH, S.COPY, S.MEMSET, S.NATIVE)


_COPY_ACCUMULATES = (1, 17)  # from Warp 1.17 the copy adjoint accumulates


def _overwrites(
    model: Model, post_loss: dict[int, tuple[int, int, int]]
) -> tuple[list[Finding], dict[tuple[int, int], tuple[int, int, Severity]]]:
    """WT101/WT103/WT104 findings, and the overwrites made by post-loss launches (for WT105):
    (site, kernel) -> (read row, write row, severity) of the first one."""
    clobbered: dict[tuple[int, int], tuple[int, int, Severity]] = {}
    built: list[Dataflow] = []

    def dataflow() -> Dataflow:  # built on first need only (most traces never need it here)
        if not built:
            built.append(dataflow_of(model))
        return built[0]

    ev_rows = model.acc_ev
    if len(ev_rows) == 0:
        return [], clobbered
    read_rows, read_bwd, write_rows = _reads_at_risk(model)
    if not len(read_rows) or not len(write_rows):
        return [], clobbered
    flags, alloc = model.acc_flags, model.acc_alloc

    # one pass per allocation in seq order; at equal seq, writes are checked before reads are added
    rows = np.concatenate([write_rows, read_rows])
    is_read = np.concatenate(
        [np.zeros(len(write_rows), dtype=np.int8), np.ones(len(read_rows), dtype=np.int8)]
    )
    bwd = np.concatenate([np.full(len(write_rows), -1, dtype=np.int64), read_bwd])
    order = np.lexsort((is_read, model.acc_seq[rows], alloc[rows]))
    rows, is_read, bwd = rows[order], is_read[order], bwd[order]
    evs = ev_rows[rows]

    geom_of = _geometry_ids(model)
    e_alloc = alloc[rows].tolist()
    e_seq = model.acc_seq[rows].tolist()
    e_read = is_read.tolist()
    e_bwd = bwd.tolist()
    e_array = model.acc_array[rows].tolist()
    e_geom = _geometries(geom_of, model.acc_array[rows])
    e_tape = model.tape[evs].tolist()
    e_site = model.site[evs].tolist()
    e_kernel = model.kernel[evs].tolist()
    e_flags = flags[rows].tolist()
    e_kind = model.kind[evs].tolist()
    e_recorded = model.recorded[evs].tolist()
    e_arg = model.acc_arg[rows].tolist()
    e_field = model.acc_field[rows].tolist()
    e_ev = evs.tolist()
    needs_value: dict[tuple[int, str, str, frozenset[str] | None], bool] = {}
    grad_args: dict[int, frozenset[str] | None] | None = None  # reader event -> grad paths
    copy_windows: dict[int, tuple[int, int] | None] = {}

    solves = _declared_functions(model)
    reached: dict[tuple[int, int], frozenset[int]] = {}

    overlap_cache: dict[tuple[int, int], bool] = {}
    geometry_rep = {gid: model.arrays[aid] for aid, gid in geom_of.items()}
    launch_code, copy_code, memset_code = K[S.LAUNCH], K[S.COPY], K[S.MEMSET]
    log = OccurrenceLog()
    pending: dict[int, dict[tuple, list[int]]] = {}
    # graph replays that copy their template: their runs of the pass repeat the template's
    replays = None
    if model.row_copies:
        grad_args = grad_args_many(model, dataflow(), ev_rows[read_rows])
        replays = plan_replay_runs(model, rows, is_read, bwd, grad_args, solves, post_loss)
    mark = replays.mark if replays is not None else None
    phantom = replays.phantom if replays is not None else {}
    open_run, open_stop = -1, -1
    positions = iter(range(len(rows)))

    for p in positions:
        alloc_id = e_alloc[p]
        seq = e_seq[p]
        if mark is not None and replays is not None:  # runs of copied graph replays (overwrite_replays)
            if p == open_stop:
                replays.close_template(open_run, pending.get(replays.template_runs[open_run].alloc), log)
                open_stop = -1
            at = mark[p]
            if at > 0:
                open_run = at - 1
                open_stop = replays.open_template(open_run, pending.get(alloc_id), seq, log)
            elif at < 0:
                after = replays.apply_block(-1 - at, pending.get(alloc_id), seq, log)
                if after >= 0:
                    deque(islice(positions, after - p - 1), maxlen=0)  # the block's positions
                    continue
        if e_read[p]:
            bucket = pending.setdefault(alloc_id, {})
            bucket[(e_tape[p], e_site[p], e_kernel[p], e_geom[p], e_arg[p], e_field[p])] = [seq, e_bwd[p], p]
            if len(bucket) + phantom.get(alloc_id, 0) > BUCKET_LIMIT:  # drop reads whose backward is over
                for stale in [k for k, r in bucket.items() if r[1] <= seq]:
                    del bucket[stale]
                phantom.pop(alloc_id, None)
            continue
        if phantom:
            phantom.pop(alloc_id, None)  # reads of applied copies, over: this write ends them
        found = pending.get(alloc_id)
        if not found:
            continue
        bucket = found
        w_geom = e_geom[p]
        w_flags = e_flags[p]
        accumulate = bool(w_flags & S.FLAG_ACCUMULATE) and not (w_flags & S.FLAG_STORE)
        consumed = []
        for key, (r_seq, r_bwd, r) in bucket.items():
            if r_bwd <= seq:
                consumed.append(key)  # its backward already ran: no longer at risk
                continue
            if r_seq >= seq:
                continue
            r_geom = e_geom[r]
            if r_geom != w_geom:
                pair = (r_geom, w_geom)
                hit = overlap_cache.get(pair)
                if hit is None:
                    hit = overlap_cache[pair] = overlaps(geometry_rep[r_geom], geometry_rep[w_geom])
                if not hit:
                    continue
            elif r_geom < 0:
                continue
            if e_kind[p] == copy_code:
                if e_ev[p] in copy_windows:
                    window = copy_windows[e_ev[p]]
                else:
                    window = copy_windows[e_ev[p]] = copy_window(model, e_ev[p], e_array[p])
                if window is not None and not overlaps_window(geometry_rep[r_geom], window):
                    continue  # a partial copy (dest_offset/count) that misses the elements read
            # Does the reader's adjoint look at the values it read? Not when it uses them
            # only linearly against constants and grad-less arrays (a transpose, an FFT,
            # `y = x * mask[i]`): then the overwrite cannot change any gradient.
            if grad_args is None:  # first need: every pending reader's at once
                grad_args = grad_args_many(model, dataflow(), ev_rows[read_rows])
            grads = grad_args[e_ev[r]]
            fact_key = (e_kernel[r], e_arg[r], e_field[r], grads)
            needed = needs_value.get(fact_key)
            if needed is None:
                kernel = model.kernels.get(e_kernel[r])
                needed = needs_value[fact_key] = adjoint_needs_value(kernel, e_arg[r], e_field[r], grads)
            if not needed and accumulate:
                continue  # the reader uses the values linearly: its adjoint never looks at them
            r_tape = e_tape[r]
            kind = e_kind[p]
            on_tape = e_tape[p] == r_tape and (
                kind in (copy_code, memset_code) or (kind == launch_code and e_recorded[p])
            )
            if not on_tape:
                code = "WT103"
                if r_tape in solves and any(
                    seq < f_seq < r_bwd
                    and alloc_id in declared
                    and not declared.isdisjoint(_reached(model, e_ev[r], f_seq, reached))
                    for f_seq, declared in solves[r_tape]
                ):
                    consumed.append(key)  # solved outside the tape, declared to it: the idiom above
                    continue
            elif e_field[r] or e_field[p] or (e_flags[r] | w_flags) & S.FLAG_FIELD:
                code = "WT104"
            else:
                code = "WT101"
            uncertain = (e_flags[r] | w_flags) & S.FLAG_UNCERTAIN
            if not needed:
                severity = Severity.INFO  # right today; fragile if the reading kernel changes
            else:
                severity = Severity.WARNING if accumulate or uncertain else Severity.ERROR
            if code != "WT103" and e_ev[p] in post_loss:
                # post-loss housekeeping inside `with tape:`: reported once, as WT105
                post_key = (e_site[p], e_kernel[p])
                if post_key not in clobbered or clobbered[post_key][2] < severity:
                    clobbered[post_key] = (int(rows[r]), int(rows[p]), severity)
                if not accumulate:
                    consumed.append(key)
                continue
            gkey = (
                code,
                e_site[p],
                e_kernel[p],
                kind,
                e_arg[p],
                e_field[p],
                e_site[r],
                e_kernel[r],
                e_arg[r],
                e_field[r],
            )
            log.add(gkey, severity, r, p, r_bwd)
            if not accumulate:
                consumed.append(key)  # the first plain overwrite is the root cause; later ones repeat it
        for key in consumed:
            bucket.pop(key, None)

    findings = []
    for gkey, group in log.groups(model, rows).items():
        read_row, write_row, backward = group.first
        findings.append(
            _overwrite_finding(
                model, group, gkey[1:], read_row=read_row, write_row=write_row, backward=backward
            )
        )
    return findings, clobbered


def _declared_functions(model: Model) -> dict[int, list[tuple[int, frozenset[int]]]]:
    """Per tape, the ``tape.record_func(backward, arrays=...)`` calls of the program (not those
    ``wp.copy`` makes): (seq, allocations of the declared arrays)."""
    out: dict[int, list[tuple[int, frozenset[int]]]] = {}
    evs = np.nonzero((model.kind == K[S.RECORD_FUNC]) & (model.parent < 0) & (model.tape >= 0))[0]
    for ev in evs.tolist():
        infos = [model.arrays.get(i) for i in model.declared_arrays(ev)]
        allocs = frozenset(info.alloc_id for info in infos if info is not None and info.alloc_id >= 0)
        if allocs:
            out.setdefault(int(model.tape[ev]), []).append((int(model.seq[ev]), allocs))
    return out


def _reached(
    model: Model, ev: int, until_seq: int, cache: dict[tuple[int, int], frozenset[int]]
) -> frozenset[int]:
    """Allocations that what event ``ev`` wrote flows into along the events recorded on its tape
    before ``until_seq`` (``ev``'s own writes included): a launch writing a temporary that a
    recorded add then folds into ``rhs`` reaches ``rhs``."""
    key = (ev, until_seq)
    hit = cache.get(key)
    if hit is not None:
        return hit
    lo = int(np.searchsorted(model.seq, model.seq[ev], side="right"))  # events are in seq order
    hi = int(np.searchsorted(model.seq, until_seq, side="left"))
    window = np.arange(lo, hi)
    evs = window[(model.tape[window] == model.tape[ev]) & model.recorded[window]]
    reached = set(_allocs(model, ev, S.ROLE_WRITE))
    for later in evs.tolist():
        if not reached.isdisjoint(_allocs(model, later, S.ROLE_READ)):
            reached.update(_allocs(model, later, S.ROLE_WRITE))
    result = cache[key] = frozenset(reached)
    return result


def _allocs(model: Model, ev: int, role: int) -> list[int]:
    rows = np.arange(model.acc_start[ev], model.acc_stop[ev])
    rows = rows[((model.acc_role[rows] & role) != 0) & (model.acc_alloc[rows] >= 0)]
    return model.acc_alloc[rows].tolist()


def _reads_at_risk(model: Model) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pending reads WT101/WT103/WT104 follow (access rows in row order, and the seq of the
    backward of each) and the writes that may hit them (rows in row order).

    Pending reads: forward launches recorded on a tape that is later backpropagated. A read is
    at risk only when a write to its allocation comes after it and before its backward; the
    others can neither be reported nor hide another read (a later read with the same pending
    key replaces an earlier one, whose backward comes no later): they are dropped, and so are
    the writes outside the window of every remaining read (same allocation, after its first
    read, before its last backward).

    A graph replay that copies an earlier one (:attr:`Model.row_copies`) has its template's reads
    at risk, moved, when the template backpropagates its reads inside its own rows
    (:func:`~warptrace.analysis.rules.overwrite_evidence.closed_row_copies`): its reads, tapes (a replay's own), backward and the writes between
    them are the template's rows in the same order. Only the other rows' reads are looked at."""
    ev_rows = model.acc_ev
    valid = ev_rows >= 0
    ev_safe = ev_rows if valid.all() else np.where(valid, ev_rows, 0)
    write_kind = isin_ids(model.kind, [K[k] for k in _WRITE_KINDS])  # per event
    empty = np.zeros(0, dtype=np.int64)
    in_place = in_place_rows(model, ev_rows)  # the launch destroyed what it read: WT102 owns it
    copies = model.row_copies
    # worked out outside the graph replays that copy an earlier one: their reads are looked at
    # only where their template's are not closed (below), their writes are their template's
    decided = model.decided_rows
    read_mask, write_mask = read_write_masks(model, decided, write_kind)
    if isinstance(decided, slice):
        read_mask[in_place] = False
        read_rows = np.nonzero(read_mask)[0]
    else:
        read_mask[np.isin(decided, in_place)] = False
        read_rows = decided[read_mask]
        write_mask_all = np.zeros(len(model.acc_seq), dtype=bool)
        write_mask_all[decided] = write_mask
        model.fill_row_copies(write_mask_all)
        write_mask = write_mask_all
    read_rows = read_rows[recorded_forward_launch(model, ev_safe[read_rows])]
    read_bwd = model.backward_after_many(model.tape[ev_safe[read_rows]], model.acc_seq[read_rows])
    if copies:
        copies, own = closed_row_copies(model, copies, read_rows, read_bwd)
        if len(own):  # the copies of an open template: their reads looked at one by one
            own_reads = read_write_masks(model, own, write_kind)[0] & ~np.isin(own, in_place)
            rows = own[own_reads]
            rows = rows[recorded_forward_launch(model, ev_safe[rows])]
            bwd = model.backward_after_many(model.tape[ev_safe[rows]], model.acc_seq[rows])
            read_rows = np.concatenate((read_rows, rows))
            read_bwd = np.concatenate((read_bwd, bwd))
            order = np.argsort(read_rows, kind="stable")
            read_rows, read_bwd = read_rows[order], read_bwd[order]
    keep = read_bwd >= 0
    read_rows, read_bwd = read_rows[keep], read_bwd[keep]

    write_rows = np.nonzero(write_mask)[0]
    if not len(read_rows) or not len(write_rows):
        return empty, empty, empty
    at_risk = _next_write_before(model, write_rows, read_rows, read_bwd)
    read_rows, read_bwd = read_rows[at_risk], read_bwd[at_risk]
    if copies and len(read_rows):
        rows_of = [read_rows]
        bwds_of = [read_bwd]
        for start, stop, template in copies:
            a, b = np.searchsorted(read_rows, [template, template + stop - start])
            if a < b:
                rows_of.append(read_rows[a:b] + (start - template))
                bwds_of.append(read_bwd[a:b] + int(model.acc_seq[start] - model.acc_seq[template]))
        read_rows = np.concatenate(rows_of)
        read_bwd = np.concatenate(bwds_of)
        order = np.argsort(read_rows, kind="stable")
        read_rows, read_bwd = read_rows[order], read_bwd[order]
    if not len(read_rows):
        return empty, empty, empty
    return read_rows, read_bwd, _writes_in_windows(model, write_rows, read_rows, read_bwd)


def _writes_in_windows(
    model: Model, write_rows: np.ndarray, read_rows: np.ndarray, read_bwd: np.ndarray
) -> np.ndarray:
    """The write rows to an allocation that ``read_rows`` read, after its first read and before the
    last backward of those reads."""
    alloc = model.acc_alloc
    read_allocs, inverse = unique_inverse(alloc[read_rows])
    first_read = np.full(len(read_allocs), np.iinfo(np.int64).max, dtype=np.int64)
    last_bwd = np.full(len(read_allocs), -1, dtype=np.int64)
    np.minimum.at(first_read, inverse, model.acc_seq[read_rows])
    np.maximum.at(last_bwd, inverse, read_bwd)
    slot = np.searchsorted(read_allocs, alloc[write_rows])
    slot_ok = slot < len(read_allocs)
    slot_c = np.minimum(slot, len(read_allocs) - 1)
    hit_alloc = slot_ok & (read_allocs[slot_c] == alloc[write_rows])
    seqs = model.acc_seq[write_rows]
    return write_rows[hit_alloc & (seqs > first_read[slot_c]) & (seqs < last_bwd[slot_c])]


def _next_write_before(
    model: Model, write_rows: np.ndarray, read_rows: np.ndarray, read_bwd: np.ndarray
) -> np.ndarray:
    """Per read row: whether one of ``write_rows`` writes its allocation after it (a later seq)
    and before its backward (seq ``read_bwd``)."""
    alloc, seq = model.acc_alloc, model.acc_seq
    w_alloc, w_seq = alloc[write_rows], seq[write_rows]
    r_alloc, r_seq = alloc[read_rows], seq[read_rows]
    low = min(int(w_seq.min()), int(r_seq.min()))
    span = max(int(w_seq.max()), int(r_seq.max())) - low + 2
    keys = np.sort(w_alloc * span + (w_seq - low))
    pos = np.searchsorted(keys, r_alloc * span + (r_seq - low), side="right")
    has = pos < len(keys)
    nxt = keys[np.minimum(pos, len(keys) - 1)]
    same_alloc = nxt // span == r_alloc
    return has & same_alloc & (nxt % span + low < read_bwd)


def _geometry_ids(model: Model) -> dict[int, int]:
    """array_id -> small id shared by every array object with the same memory geometry."""
    interned: dict[tuple, int] = {}
    result = {}
    for array_id, info in model.arrays.items():
        if info.alloc_id < 0:
            continue
        geometry = (info.alloc_id, info.offset, info.shape, info.strides, info.itemsize)
        result[array_id] = interned.setdefault(geometry, len(interned))
    return result


def _geometries(geom_of: dict[int, int], array_ids: np.ndarray) -> list[int]:
    """``[geom_of.get(a, -1) for a in array_ids]``, by a search in the sorted ids."""
    if not geom_of:
        return [-1] * len(array_ids)
    ids = np.fromiter(geom_of, dtype=np.int64, count=len(geom_of))
    geoms = np.fromiter(geom_of.values(), dtype=np.int64, count=len(geom_of))
    order = np.argsort(ids)
    ids, geoms = ids[order], geoms[order]
    at = np.minimum(np.searchsorted(ids, array_ids), len(ids) - 1)
    found: list[int] = np.where(ids[at] == array_ids, geoms[at], -1).tolist()
    return found


def _overwrite_finding(
    model: Model, group: Group, key: tuple, read_row: int, write_row: int, backward: int
) -> Finding:
    code = group.code
    read_ev = int(model.acc_ev[read_row])
    write_ev = int(model.acc_ev[write_row])
    backward_ev = model.ev_of_seq(backward)
    r_array, w_array = int(model.acc_array[read_row]), int(model.acc_array[write_row])
    r_arg, w_arg = model.acc_arg[read_row], model.acc_arg[write_row]
    r_field, w_field = model.acc_field[read_row], model.acc_field[write_row]
    reader = quote(model.kernel_name(read_ev))
    buffer = buffer_name(model, r_array, r_arg)
    field = arg_path(r_arg, r_field) if r_field else (arg_path(w_arg, w_field) if w_field else "")
    if code == "WT104":
        subject = f"struct field {quote(field)}"
        if buffer != quote(field):
            subject += f" ({buffer})"
    else:
        subject = buffer
    read_as = "" if quote(arg_path(r_arg, r_field)) in subject else f" as {quote(arg_path(r_arg, r_field))}"
    writer = writer_phrase(model, write_ev, write_row, subject)
    read_at = site_line(model, int(model.site[read_ev]))
    backward_at = site_line(model, int(model.site[backward_ev]))

    if code == "WT103":
        how = how_unrecorded(model, write_ev, int(model.tape[read_ev]))
        message = (
            f"{writer} modifies {subject} {how}, after kernel {reader} read it{read_as} on the tape ({read_at}) "
            f"and before tape.backward() ({backward_at}), so the adjoint of {reader} runs against the modified "
            "values"
        )
    else:
        message = (
            f"{writer} overwrites {subject}, which kernel {reader} read{read_as} earlier on the same tape "
            f"({read_at}), so tape.backward() ({backward_at}) runs the adjoint of {reader} against the new values"
        )
    if group.severity == Severity.INFO:
        message += (
            f"; gradients are right today because the adjoint of {reader} never looks at these values (it uses "
            "them only linearly, against constants and arrays without gradient), but a change to that kernel "
            "would silently break them"
        )
    elif group.severity < Severity.ERROR:
        if (int(model.acc_flags[read_row]) | int(model.acc_flags[write_row])) & S.FLAG_UNCERTAIN:
            message += (
                " (a kernel here could not be analysed, so its read/write sets are a conservative guess)"
            )
        else:
            message += (
                f" (the write only accumulates, but the adjoint of {reader} uses the old values non-linearly)"
            )
    message += alias_clause(model, r_array, r_arg, w_array, w_arg, read_ev, write_ev)
    if int(model.kind[write_ev]) == K[S.COPY] and model.warp_version >= _COPY_ACCUMULATES:
        message += (
            "; on Warp >= 1.17 a copy that writes back unchanged values still gives the right gradient, but "
            "the first copy that changes them does not, and the fix is the same"
        )
    clauses, fix = unchanged_and_owner_clauses(model, group, subject, r_array, write_ev, read_ev)
    message += clauses
    related: list[Location] = []
    append_loc(related, model.event_location(read_ev, "read"))
    append_loc(related, model.location(model.allocation_site(r_array), "allocation"))
    append_loc(related, model.event_location(backward_ev, "backward"))
    location = model.event_location(write_ev, "mutation" if code == "WT103" else "overwrite")
    result = grouped_finding(
        _INFOS[code], group, message, location, related, key, backward_seq=int(backward), field=field
    )
    result.fix = fix or result.fix
    return result


def overwrites(model: Model) -> tuple[list[Finding], dict[tuple[int, int], tuple[int, int, Severity]]]:
    """The WT101/WT103/WT104 findings and the overwrites made by post-loss launches (WT105 names
    them); computed once per model."""
    return shared(model, "overwrites", lambda m: _overwrites(m, post_loss_launches(m)))


def check(model: Model) -> list[Finding]:
    return overwrites(model)[0]


RULE = Rule((WT101, WT103, WT104), check)
