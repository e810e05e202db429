"""Memory hazards inside one tape (WT101-WT105).

``tape.backward()`` replays the adjoint of every recorded launch *against the current
contents of memory*; nothing is snapshotted. So any write, made before the backward,
to memory that a recorded launch read silently changes that launch's gradient. These
rules prove such writes from the trace alone:

WT101 overwrite-after-read (error)
    A launch recorded on tape T read buffer B; later, while T was still the active
    tape and before T's backward, something wrote B: a recorded launch, a copy
    (``wp.copy``/``assign``/``clone`` onto B) or a memset (``zero_``/``fill_``).
    Typical disguises: a force or scratch buffer reused every step, two state buffers
    used in turn ("ping-pong"), a result copied back into the state, and Python
    rebinding (``states[0] = states[-1]``) that makes two "different" states one
    object. The message names every Python label of the buffer. A write that only
    accumulates (``+=``, ``atomic_add``) is a warning, and only when the reading
    kernel's source shows that its adjoint needs the old values (a product with another
    array value, a division, ``sin``/``tanh``/..., a branch or an index); a linear read
    such as ``q[i] += dt * qd[i]`` is unaffected by later accumulation. A partial copy
    (``dest_offset``/``count``) overwrites only its window. On Warp >= 1.17 a copy that
    writes back unchanged values still yields a right gradient; it is reported all the
    same (values are not recorded, and the first real change breaks it).
    Fix: write each step's result to a new array (``steps + 1`` state buffers, one
    buffer per intermediate); reset or copy buffers only after ``tape.backward()``.

WT102 in-kernel-overwrite (error)
    One recorded launch reads an argument and stores plain values into it
    (``x[i] = f(x[i])``), directly or inside a ``@wp.func`` it calls. The adjoint
    re-reads the overwritten values. ``+=`` and atomics are exempt, and so is a kernel
    that stores first and reads its own result back (``y[i] = f(x); h = y[i]``).
    Later launches overwriting what an in-place launch read are not reported again.
    Fix: write the result to a separate output array.

WT103 mutation-before-backward (error)
    Memory read by a recorded launch on T is changed before T's backward by
    something T did not record: an untaped launch (also ``record_tape=False`` and
    ``Launch`` replays), a memset or copy outside the tape, a native utility, a
    write through another Python object over the same memory (``wp.array(ptr=...)``,
    numpy/torch zero-copy), a launch recorded on another tape or that tape's backward.
    Warp's own overwrite tracker cannot see any of these. (What decides WT101 versus
    WT103 is whether T recorded the write; a write through an alias recorded on T is
    WT101, and its message says which object aliased the memory.)
    Fix: move the mutation after ``tape.backward()``.

WT104 struct-field-overwrite (error)
    WT101 or WT102 where the read or the write goes through a ``@wp.struct`` field;
    reported with the field path (``state.q``). Warp's tracker never sees struct
    fields.
    Fix: give the struct a separate output array (or a new instance per step).

WT105 work-after-loss (warning)
    Launches recorded on T after the last recorded launch writing the loss, before
    T's backward: post-loss housekeeping (state reset, metrics, logging) indented
    inside ``with tape:``. Their adjoints run for nothing; when such a launch also
    overwrites memory an earlier launch on the tape read, the finding is an error and
    names that buffer (it is not reported a second time as WT101). Moving them outside
    the ``with`` block but still before ``tape.backward()`` turns their overwrites into
    WT103.
    Fix: move the work after ``tape.backward()``.

Warp documentation: "Differentiability", sections "Array Overwrites" and "Array
Overwrite Tracking".

Only reads by forward launches count (a copy's adjoint does not need its source
values), and reads of gradient buffers are ignored. The first plain overwrite settles
the read it clobbered: later writes of that memory before the next read (a memset and
then an atomic scatter into the same buffer) are the same root cause and are not
reported again. Findings are grouped by root cause: one finding per (code, writing call, reading launch, buffer role) with
the number of occurrences, so a bug inside a 500-step loop is one finding with
``count == 500``. The analysis is linear in the number of accesses: per allocation,
in sequence order, it keeps only the latest pending read per (tape, reading call,
kernel, view geometry).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

from warptrace.analysis.findings import Finding, Location, RuleInfo, Severity
from warptrace.analysis.model import ArrayInfo, K, KernelInfo, Model, overlaps
from warptrace.trace import schema as S

DOC_OVERWRITES = "Differentiability > Array Overwrites"
DOC_TRACKING = "Differentiability > Array Overwrite Tracking"

RULES = (
    RuleInfo(
        code="WT101",
        name="overwrite-after-read",
        family="memory",
        fix="write each step's result to a new array (keep steps + 1 state buffers and one buffer per "
        "intermediate); reset or copy buffers only after tape.backward()",
        doc=DOC_OVERWRITES,
    ),
    RuleInfo(
        code="WT102",
        name="in-kernel-overwrite",
        family="memory",
        fix="store the result into a separate output array instead of updating the input in place "
        "(x_out[i] = f(x_in[i])); += and wp.atomic_add are safe",
        doc=DOC_OVERWRITES,
    ),
    RuleInfo(
        code="WT103",
        name="mutation-before-backward",
        family="memory",
        fix="move the mutating call after tape.backward(), or record it on the tape with its own output array",
        doc=DOC_TRACKING,
    ),
    RuleInfo(
        code="WT104",
        name="struct-field-overwrite",
        family="memory",
        fix="give the struct a separate output array for the updated field (or a new struct instance per "
        "step) instead of writing the field an earlier launch read",
        doc=DOC_TRACKING,
    ),
    RuleInfo(
        code="WT105",
        name="work-after-loss",
        family="memory",
        fix="move post-loss work (state reset, metrics, logging, optimizer steps) out of `with tape:` and "
        "after tape.backward()",
        doc=DOC_OVERWRITES,
    ),
)
INFO = {info.code: info for info in RULES}

_WRITE_KINDS = (S.LAUNCH, S.CMD_LAUNCH, S.COPY, S.MEMSET, S.NATIVE)
_EXAMPLES = 5  # seqs kept as evidence per finding
_COPY_ACCUMULATES = (1, 17)  # from Warp 1.17 the copy adjoint accumulates


def check(model: Model) -> list[Finding]:
    """Run WT101-WT105 over the model."""
    post_loss = _post_loss_launches(model)
    findings = _in_kernel_overwrites(model, post_loss)
    overwrites, clobbered = _overwrites(model, post_loss)
    findings += overwrites
    findings += _work_after_loss(model, post_loss, clobbered)
    return findings


# ---------------------------------------------------------------- shared helpers
def _quote(name: str) -> str:
    return f"`{name}`"


def _field_path(arg: str, field_path: str) -> str:
    return f"{arg}.{field_path}" if field_path else arg


def _site_line(model: Model, site: int) -> str:
    loc = model.location(site)
    return f"line {loc.line}" if loc.line else "an unknown line"


def _append_loc(related: list[Location], loc: Location | None) -> None:
    if loc is not None and loc.line > 0 and loc not in related:
        related.append(loc)


def _grad_mask(model: Model, array_ids: np.ndarray, flags: np.ndarray) -> np.ndarray:
    grads = model.grad_array_ids
    is_grad = np.isin(array_ids, grads) if len(grads) else np.zeros(len(array_ids), dtype=bool)
    return is_grad | ((flags & S.FLAG_GRAD) != 0)


def _kernel_arg_fact(model: Model, kernel_id: int, arg: str, field_path: str, attr: str) -> bool | None:
    kernel = model.kernels.get(int(kernel_id))
    if kernel is None:
        return None
    fact = kernel.arg(arg, field_path)
    if fact is None:
        return None
    return bool(getattr(fact, attr))


def _in_place_rows(model: Model, ev_rows: np.ndarray) -> np.ndarray:
    """Access rows (of recorded forward launches) that read and plainly store the same array: WT102/WT104."""
    role = model.acc_role
    flags = model.acc_flags
    mask = (role == S.ROLE_READWRITE) & ((flags & S.FLAG_STORE) != 0) & ((flags & S.FLAG_UNCERTAIN) == 0)
    mask &= ev_rows >= 0
    rows = np.nonzero(mask)[0]
    rows = rows[_recorded_forward_launch(model, ev_rows[rows])]
    if len(rows):
        rows = rows[~_grad_mask(model, model.acc_array[rows], flags[rows])]
    keep = []
    for row in rows.tolist():
        kernel_id = int(model.kernel[ev_rows[row]])
        arg, field_path = model.acc_arg[row], model.acc_field[row]
        read = _kernel_arg_fact(model, kernel_id, arg, field_path, "read")
        store = _kernel_arg_fact(model, kernel_id, arg, field_path, "store")
        if read is False or store is False:
            continue  # the kernel facts say the access is not a read-then-store
        if not _store_after_read(model.kernels.get(kernel_id), arg, field_path):
            continue  # stores first and reads its own result back: the replay is identical
        keep.append(row)
    return np.asarray(keep, dtype=np.int64)


def _recorded_forward_launch(model: Model, evs: np.ndarray) -> np.ndarray:
    return (
        (model.kind[evs] == K[S.LAUNCH])
        & model.recorded[evs]
        & ~model.adjoint[evs]
        & (model.phase[evs] == S.FORWARD)
        & (model.tape[evs] >= 0)
    )


@dataclass
class _Group:
    """One root cause being accumulated: the first occurrence describes it, the rest count."""

    code: str
    severity: Severity
    first: tuple[int, ...]  # rows describing the first occurrence (rule specific)
    count: int = 0
    write_seqs: list[int] = field(default_factory=list)
    read_seqs: list[int] = field(default_factory=list)
    array_ids: set[int] = field(default_factory=set)
    alloc_ids: set[int] = field(default_factory=set)

    def add(
        self, severity: Severity, write_seq: int, read_seq: int, array_ids: tuple[int, ...], alloc: int
    ) -> None:
        self.count += 1
        self.severity = max(self.severity, severity)
        if len(self.write_seqs) < _EXAMPLES:
            self.write_seqs.append(write_seq)
            self.read_seqs.append(read_seq)
        if len(self.array_ids) < 4 * _EXAMPLES:
            self.array_ids.update(array_ids)
        if len(self.alloc_ids) < _EXAMPLES:
            self.alloc_ids.add(alloc)

    def evidence(self, **extra: object) -> dict[str, object]:
        return {
            "first_seq": self.write_seqs[0] if self.write_seqs else 0,
            "write_seqs": list(self.write_seqs),
            "read_seqs": list(self.read_seqs),
            "array_ids": sorted(self.array_ids),
            "alloc_ids": sorted(self.alloc_ids),
            **extra,
        }


def _finding(code: str, group: _Group, message: str, location: Location, related: list[Location], key: tuple,
             **evidence: object) -> Finding:  # fmt: skip
    info = INFO[code]
    return Finding(
        code=code,
        name=info.name,
        severity=group.severity,
        message=message,
        location=location,
        related=related,
        fix=info.fix,
        doc=info.doc,
        count=group.count,
        evidence=group.evidence(**evidence),
        key=key,
    )


# ---------------------------------------------------------------- WT102 / WT104 in one launch
def _in_kernel_overwrites(model: Model, post_loss: dict[int, tuple[int, int, int]]) -> list[Finding]:
    ev_rows = model.acc_ev
    rows = _in_place_rows(model, ev_rows)
    if not len(rows):
        return []
    evs = ev_rows[rows]
    bwd = model.backward_after_many(model.tape[evs], model.seq[evs])
    groups: dict[tuple, _Group] = {}
    for row, ev, backward in zip(rows.tolist(), evs.tolist(), bwd.tolist()):
        if backward < 0:
            continue  # never backpropagated: the overwrite cannot hurt a gradient
        if ev in post_loss:
            continue  # its adjoint feeds nothing: the root cause is WT105
        arg, field_path = model.acc_arg[row], model.acc_field[row]
        code = "WT104" if field_path or (model.acc_flags[row] & S.FLAG_FIELD) else "WT102"
        key = (int(model.site[ev]), int(model.kernel[ev]), arg, field_path)
        group = groups.get((code, *key))
        if group is None:
            group = groups[(code, *key)] = _Group(code, Severity.ERROR, (row, ev, backward))
        seq = int(model.seq[ev])
        group.add(Severity.ERROR, seq, seq, (int(model.acc_array[row]),), int(model.acc_alloc[row]))

    findings = []
    for (code, *key), group in groups.items():
        row, ev, backward = group.first
        arg, field_path = model.acc_arg[row], model.acc_field[row]
        kernel_id = int(model.kernel[ev])
        array_id = int(model.acc_array[row])
        kernel = model.kernel_name(ev)
        buffer = _buffer_name(model, array_id, arg)
        backward_ev = model.ev_of_seq(backward)
        path = _quote(_field_path(arg, field_path))
        if code == "WT104":
            subject = f"struct field {path}" + ("" if buffer == path else f" ({buffer})")
        else:
            subject = buffer if buffer == path else f"{buffer} (argument {path})"
        message = (
            f"kernel {_quote(kernel)} reads {subject} and stores into it in the same launch, so the adjoint "
            f"run by tape.backward() at {_site_line(model, int(model.site[backward_ev]))} re-reads the "
            "overwritten values instead of the ones the forward pass used"
        )
        related: list[Location] = []
        fact = model.kernels.get(kernel_id).arg(arg, field_path) if kernel_id in model.kernels else None
        if fact is not None:
            _append_loc(related, model.kernel_line(kernel_id, fact.write_line, "store"))
            _append_loc(related, model.kernel_line(kernel_id, fact.read_line, "read"))
        _append_loc(related, model.event_location(backward_ev, "backward"))
        findings.append(
            _finding(
                code,
                group,
                message,
                model.event_location(ev, "in-place launch"),
                related,
                tuple(key),
                field=_field_path(arg, field_path) if code == "WT104" else "",
            )
        )
    return findings


# ---------------------------------------------------------------- WT101 / WT103 / WT104 across launches
def _overwrites(
    model: Model, post_loss: dict[int, tuple[int, int, int]]
) -> tuple[list[Finding], dict[tuple[int, int], tuple[int, int, Severity]]]:
    """WT101/WT103/WT104 findings, and the overwrites made by post-loss launches (for WT105):
    (site, kernel) -> (read row, write row, severity) of the first one."""
    clobbered: dict[tuple[int, int], tuple[int, int, Severity]] = {}
    ev_rows = model.acc_ev
    n = len(ev_rows)
    if n == 0:
        return [], clobbered
    valid = ev_rows >= 0
    ev_safe = np.where(valid, ev_rows, 0)
    role, flags, alloc = model.acc_role, model.acc_flags, model.acc_alloc
    not_grad = ~_grad_mask(model, model.acc_array, flags)

    # pending reads: forward launches recorded on a tape that is later backpropagated
    read_mask = valid & ((role & S.ROLE_READ) != 0) & not_grad & (alloc >= 0)
    read_mask[_in_place_rows(model, ev_rows)] = False  # the launch destroyed what it read: WT102 owns it
    read_rows = np.nonzero(read_mask)[0]
    read_rows = read_rows[_recorded_forward_launch(model, ev_safe[read_rows])]
    if not len(read_rows):
        return [], clobbered
    read_bwd = model.backward_after_many(model.tape[ev_safe[read_rows]], model.acc_seq[read_rows])
    keep = read_bwd >= 0
    read_rows, read_bwd = read_rows[keep], read_bwd[keep]
    if not len(read_rows):
        return [], clobbered

    # writes that may hit them: same allocation, after its first read, before its last backward
    write_kinds = np.isin(model.kind[ev_safe], [K[k] for k in _WRITE_KINDS])
    write_mask = valid & ((role & S.ROLE_WRITE) != 0) & not_grad & (alloc >= 0) & write_kinds
    write_rows = _writes_in_windows(model, np.nonzero(write_mask)[0], read_rows, read_bwd)
    if not len(write_rows):
        return [], clobbered
    # a read is at risk only when a write to its allocation comes after it and before its backward;
    # the others can neither be reported nor hide another read (a later read with the same pending
    # key replaces an earlier one, whose backward comes no later): drop them, and the writes that
    # no longer fall in the window of any remaining read
    at_risk = _next_write_before(model, write_rows, read_rows, read_bwd)
    if not at_risk.all():
        read_rows, read_bwd = read_rows[at_risk], read_bwd[at_risk]
        if not len(read_rows):
            return [], clobbered
        write_rows = _writes_in_windows(model, write_rows, read_rows, read_bwd)

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
    e_geom = [geom_of.get(a, -1) for a in e_array]
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
    grad_args: dict[int, frozenset[str] | None] = {}
    grad_signatures: dict[tuple, frozenset[str] | None] = {}
    copy_windows: dict[int, tuple[int, int] | None] = {}

    overlap_cache: dict[tuple[int, int], bool] = {}
    geometry_rep = {gid: model.arrays[aid] for aid, gid in geom_of.items()}
    launch_code, copy_code, memset_code = K[S.LAUNCH], K[S.COPY], K[S.MEMSET]
    groups: dict[tuple, _Group] = {}
    pending: dict[int, dict[tuple, list[int]]] = {}

    for p in range(len(rows)):
        alloc_id = e_alloc[p]
        seq = e_seq[p]
        if e_read[p]:
            bucket = pending.setdefault(alloc_id, {})
            bucket[(e_tape[p], e_site[p], e_kernel[p], e_geom[p], e_arg[p], e_field[p])] = [seq, e_bwd[p], p]
            if len(bucket) > 256:  # drop reads whose backward is over
                for stale in [k for k, r in bucket.items() if r[1] <= seq]:
                    del bucket[stale]
            continue
        bucket = pending.get(alloc_id)
        if not bucket:
            continue
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
                window = copy_windows.get(e_ev[p], ())
                if window == ():
                    window = copy_windows[e_ev[p]] = _copy_window(model, e_ev[p], e_array[p])
                if window is not None and not _overlaps_window(geometry_rep[r_geom], window):
                    continue  # a partial copy (dest_offset/count) that misses the elements read
            # Does the reader's adjoint look at the values it read? Not when it uses them
            # only linearly against constants and grad-less arrays (a transpose, an FFT,
            # `y = x * mask[i]`): then the overwrite cannot change any gradient.
            reader_ev = e_ev[r]
            grads = grad_args.get(reader_ev)
            if grads is None:
                grads = grad_args[reader_ev] = _grad_args(model, reader_ev, grad_signatures)
            fact_key = (e_kernel[r], e_arg[r], e_field[r], grads)
            needed = needs_value.get(fact_key)
            if needed is None:
                kernel = model.kernels.get(e_kernel[r])
                needed = needs_value[fact_key] = _adjoint_needs_value(kernel, e_arg[r], e_field[r], grads)
            if not needed and accumulate:
                continue  # the reader uses the values linearly: its adjoint never looks at them
            r_tape = e_tape[r]
            kind = e_kind[p]
            on_tape = e_tape[p] == r_tape and (
                kind in (copy_code, memset_code) or (kind == launch_code and e_recorded[p])
            )
            if not on_tape:
                code = "WT103"
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
            group = groups.get(gkey)
            if group is None:
                group = groups[gkey] = _Group(code, severity, (r, p, r_bwd))
            group.add(severity, seq, r_seq, (e_array[r], e_array[p]), alloc_id)
            if not accumulate:
                consumed.append(key)  # the first plain overwrite is the root cause; later ones repeat it
        for key in consumed:
            bucket.pop(key, None)

    findings = []
    for gkey, group in groups.items():
        r, p, backward = group.first
        findings.append(
            _overwrite_finding(
                model,
                group,
                gkey[1:],
                read_row=int(rows[r]),
                write_row=int(rows[p]),
                backward=backward,
            )
        )
    return findings, clobbered


def _writes_in_windows(
    model: Model, write_rows: np.ndarray, read_rows: np.ndarray, read_bwd: np.ndarray
) -> np.ndarray:
    """The write rows to an allocation that ``read_rows`` read, after its first read and before the
    last backward of those reads."""
    alloc = model.acc_alloc
    read_allocs, inverse = np.unique(alloc[read_rows], return_inverse=True)
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


def _copy_window(model: Model, ev: int, dest: int) -> tuple[int, int] | None:
    """Byte range a partial ``wp.copy(dest, src, dest_offset, src_offset, count)`` wrote; None = all of dest."""
    detail = model.detail(ev)
    if not isinstance(detail, dict) or not (detail.get("dest_offset") or detail.get("count")):
        return None
    info = model.arrays.get(dest)
    if info is None or not info.contiguous or info.itemsize <= 0:
        return None
    count = int(detail.get("count") or 0)
    if count <= 0:  # Warp copies src.size elements
        sources = [int(model.acc_array[row]) for row in model.accesses_of(ev) if model.acc_arg[row] == "src"]
        src = model.arrays.get(sources[0]) if sources else None
        if src is None:
            return None
        count = src.size
    start = info.offset + int(detail.get("dest_offset") or 0) * info.itemsize
    return (start, start + count * info.itemsize)


def _overlaps_window(info: ArrayInfo, window: tuple[int, int]) -> bool:
    low, high = window
    hull_low, hull_high = info.hull
    if hull_high <= low or high <= hull_low:
        return False
    offsets = info.element_offsets()
    if offsets is None:
        return True
    return bool(np.any((offsets < high) & (offsets + info.itemsize > low)))


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


def _buffer_name(model: Model, array_id: int, arg: str) -> str:
    """The user's name for a buffer: its label, else where it was allocated, else the argument."""
    label = model.array_label(array_id)
    if not label.startswith("array#"):
        return _quote(label)
    loc = model.location(model.allocation_site(array_id))
    if loc.line:
        return f"the array allocated at line {loc.line}"
    return f"the array passed as {_quote(arg)}"


def _writer_phrase(model: Model, ev: int, row: int, subject: str) -> str:
    kind = int(model.kind[ev])
    path = _quote(_field_path(model.acc_arg[row], model.acc_field[row]))
    if kind in (K[S.LAUNCH], K[S.CMD_LAUNCH]):
        what = "the adjoint of kernel" if model.adjoint[ev] else "kernel"
        phrase = f"{what} {_quote(model.kernel_name(ev))}"
        if kind == K[S.CMD_LAUNCH]:
            phrase = f"a replayed Launch object (record_cmd=True) of kernel {_quote(model.kernel_name(ev))}"
        return phrase if path in subject else f"{phrase} (argument {path})"
    if kind == K[S.COPY]:
        return "a copy (wp.copy / assign / clone)"
    if kind == K[S.MEMSET]:
        value = model.value[ev]
        if value == 0 or np.isnan(value):
            return "a memset (zero_ / fill_)"
        return f"a memset (fill_({value:g}))"
    detail = model.detail(ev)
    name = (detail.get("func") or detail.get("function")) if isinstance(detail, dict) else None
    return f"the native utility {_quote(name)}" if name else "a native Warp utility"


def _how_unrecorded(model: Model, write_ev: int, read_tape: int) -> str:
    kind = int(model.kind[write_ev])
    tape = int(model.tape[write_ev])
    if kind == K[S.CMD_LAUNCH]:
        return "(a tape never records these)"
    if kind == K[S.NATIVE]:
        return "(Warp never records native utilities on a tape)"
    if model.phase[write_ev] == S.BACKWARD:
        return "during the backward pass of another tape"
    if tape == read_tape:
        return "inside `with tape:` without being recorded (record_tape=False)"
    if tape >= 0:
        return "while recorded on a different tape"
    return "outside the tape, which did not record it"


def _overwrite_finding(
    model: Model, group: _Group, key: tuple, read_row: int, write_row: int, backward: int
) -> Finding:
    code = group.code
    read_ev = int(model.acc_ev[read_row])
    write_ev = int(model.acc_ev[write_row])
    backward_ev = model.ev_of_seq(backward)
    r_array, w_array = int(model.acc_array[read_row]), int(model.acc_array[write_row])
    r_arg, w_arg = model.acc_arg[read_row], model.acc_arg[write_row]
    r_field, w_field = model.acc_field[read_row], model.acc_field[write_row]
    reader = _quote(model.kernel_name(read_ev))
    buffer = _buffer_name(model, r_array, r_arg)
    field = _field_path(r_arg, r_field) if r_field else (_field_path(w_arg, w_field) if w_field else "")
    if code == "WT104":
        subject = f"struct field {_quote(field)}"
        if buffer != _quote(field):
            subject += f" ({buffer})"
    else:
        subject = buffer
    read_as = (
        "" if _quote(_field_path(r_arg, r_field)) in subject else f" as {_quote(_field_path(r_arg, r_field))}"
    )
    writer = _writer_phrase(model, write_ev, write_row, subject)
    read_at = _site_line(model, int(model.site[read_ev]))
    backward_at = _site_line(model, int(model.site[backward_ev]))

    if code == "WT103":
        how = _how_unrecorded(model, write_ev, int(model.tape[read_ev]))
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
    message += _alias_clause(model, r_array, r_arg, w_array, w_arg, read_ev, write_ev)
    if int(model.kind[write_ev]) == K[S.COPY] and model.warp_version >= _COPY_ACCUMULATES:
        message += (
            "; on Warp >= 1.17 a copy that writes back unchanged values still gives the right gradient, but "
            "the first copy that changes them does not, and the fix is the same"
        )

    related: list[Location] = []
    _append_loc(related, model.event_location(read_ev, "read"))
    _append_loc(related, model.location(model.allocation_site(r_array), "allocation"))
    _append_loc(related, model.event_location(backward_ev, "backward"))
    role = "mutation" if code == "WT103" else "overwrite"
    location = model.event_location(write_ev, role)
    return _finding(code, group, message, location, related, key, backward_seq=int(backward), field=field)


def _alias_clause(
    model: Model, r_array: int, r_arg: str, w_array: int, w_arg: str, read_ev: int, write_ev: int
) -> str:
    """Explain why the write lands on the read memory when the program names it differently."""
    labels = model.aliases([r_array, w_array])
    names = ", ".join(_quote(name) for name in labels)
    w_info = model.arrays.get(w_array)
    r_info = model.arrays.get(r_array)
    if w_array != r_array and w_info is not None and r_info is not None:
        kinds = {w_info.kind, r_info.kind}
        if kinds & {S.ARRAY_PTR_ALIAS, S.ARRAY_EXTERNAL, S.ARRAY_PREEXISTING}:
            why = "a wp.array(ptr=...) alias or a numpy/torch zero-copy view"
        else:
            why = "a view or another array object"
        clause = f"; the write goes through a different Python object over the same memory ({why})"
        return clause + (f"; names of this memory: {names}" if names else "")
    same_kernel = int(model.kind[write_ev]) == K[S.LAUNCH] and model.kernel[write_ev] == model.kernel[read_ev]
    if same_kernel and w_arg != r_arg:
        clause = (
            f"; the same array is passed as {_quote(r_arg)} and later as {_quote(w_arg)}: buffers used in turn "
            "(ping-pong) or a rebinding such as `states[0] = states[-1]` make an earlier step's input a later "
            "step's output"
        )
        return clause + (f" (names of this memory: {names})" if names else "")
    if len(labels) > 1:
        return f"; this memory is known under several names: {names}"
    return ""


# ---------------------------------------------------------------- WT105
def _post_loss_launches(model: Model) -> dict[int, tuple[int, int, int]]:
    """Recorded forward launches after the loss is final and before the backward:
    launch event -> (event that last wrote the loss, backward_begin event, loss array id)."""
    backwards = [begin for tape in model.tapes.values() for begin in tape.backward_begins]
    losses_of = {begin: _loss_arrays(model, model.ev_of_seq(begin)) for begin in backwards}
    loss_writes = _loss_writes(model, {a for losses in losses_of.values() for a in losses})
    post_loss: dict[int, tuple[int, int, int]] = {}
    for tape in model.tapes.values():
        if not any(losses_of[begin] for begin in tape.backward_begins):
            continue
        events = np.asarray(tape.events, dtype=np.int64)
        recorded_evs = events[
            model.recorded[events]
            & ~model.adjoint[events]
            & (model.phase[events] == S.FORWARD)
            & (model.kind[events] == K[S.LAUNCH])
        ]
        recorded_seqs = model.seq[recorded_evs]
        for begin in tape.backward_begins:
            losses = losses_of[begin]
            if not losses:
                continue
            reset_index = bisect.bisect_left(tape.resets, begin)
            start = tape.resets[reset_index - 1] if reset_index else -1
            last_write_ev = _last_loss_write(model, loss_writes.get(tape.tape_id), losses, start, begin)
            if last_write_ev < 0:
                continue  # the loss is not computed on this tape (another rule's business)
            lo = int(np.searchsorted(recorded_seqs, model.seq[last_write_ev], side="right"))
            hi = int(np.searchsorted(recorded_seqs, begin, side="left"))
            begin_ev = model.ev_of_seq(begin)
            for ev in recorded_evs[lo:hi].tolist():
                post_loss.setdefault(ev, (last_write_ev, begin_ev, losses[0]))
    return post_loss


def _work_after_loss(
    model: Model,
    post_loss: dict[int, tuple[int, int, int]],
    clobbered: dict[tuple[int, int], tuple[int, int, Severity]],
) -> list[Finding]:
    groups: dict[tuple[int, int], _Group] = {}
    for ev in sorted(post_loss):
        loss_ev, begin_ev, loss_array = post_loss[ev]
        gkey = (int(model.site[ev]), int(model.kernel[ev]))
        group = groups.get(gkey)
        if group is None:
            severity = clobbered[gkey][2] if gkey in clobbered else Severity.WARNING
            group = groups[gkey] = _Group("WT105", severity, (ev, loss_ev, begin_ev, loss_array))
        group.add(group.severity, int(model.seq[ev]), int(model.seq[loss_ev]), (), -1)

    findings = []
    for gkey, group in groups.items():
        ev, loss_ev, begin_ev, loss_array = group.first
        message = (
            f"kernel {_quote(model.kernel_name(ev))} is recorded on the tape after the loss "
            f"{_quote(model.array_label(loss_array))} is final (last written by {_writer_phrase_short(model, loss_ev)} "
            f"at {_site_line(model, int(model.site[loss_ev]))}) and does not feed it, so tape.backward() "
            f"({_site_line(model, int(model.site[begin_ev]))}) runs its adjoint for nothing"
        )
        related: list[Location] = []
        if gkey in clobbered:
            read_row = clobbered[gkey][0]
            read_ev = int(model.acc_ev[read_row])
            reader = _quote(model.kernel_name(read_ev))
            buffer = _quote(model.array_label(int(model.acc_array[read_row]), model.acc_arg[read_row]))
            message += (
                f"; worse, it overwrites {buffer}, which kernel {reader} read earlier on the tape "
                f"({_site_line(model, int(model.site[read_ev]))}), so the adjoint of {reader} runs against the "
                "new values"
            )
            _append_loc(related, model.event_location(read_ev, "read"))
            _append_loc(
                related, model.location(model.allocation_site(int(model.acc_array[read_row])), "allocation")
            )
            group.array_ids.add(int(model.acc_array[read_row]))
            group.alloc_ids.add(int(model.acc_alloc[read_row]))
        else:
            message += "; anything it overwrites would also corrupt the adjoints of earlier launches"
        _append_loc(related, model.event_location(loss_ev, "loss final"))
        _append_loc(related, model.event_location(begin_ev, "backward"))
        location = model.event_location(ev, "post-loss launch")
        findings.append(_finding("WT105", group, message, location, related, gkey))
    return findings


def _writer_phrase_short(model: Model, ev: int) -> str:
    if model.kind[ev] in (K[S.LAUNCH], K[S.CMD_LAUNCH]):
        return _quote(model.kernel_name(ev))
    return "a copy" if model.kind[ev] == K[S.COPY] else "a memset"


def _loss_writes(model: Model, loss_arrays: set[int]) -> dict[int, list[tuple[int, int, int]]]:
    """tape id -> [(seq, ev, array_id)] of recorded forward writes into the memory of any loss array."""
    infos = [model.arrays[a] for a in loss_arrays if a in model.arrays and model.arrays[a].alloc_id >= 0]
    if not infos:
        return {}
    allocs = np.array(sorted({info.alloc_id for info in infos}), dtype=np.int64)
    rows = np.nonzero(((model.acc_role & S.ROLE_WRITE) != 0) & np.isin(model.acc_alloc, allocs))[0]
    evs = model.acc_ev[rows]
    keep = evs >= 0
    rows, evs = rows[keep], evs[keep]
    keep = (
        model.recorded[evs] & ~model.adjoint[evs] & (model.phase[evs] == S.FORWARD) & (model.tape[evs] >= 0)
    )
    rows, evs = rows[keep], evs[keep]
    by_tape: dict[int, list[tuple[int, int, int]]] = {}
    for row, ev in zip(rows.tolist(), evs.tolist()):
        by_tape.setdefault(int(model.tape[ev]), []).append(
            (int(model.seq[ev]), ev, int(model.acc_array[row]))
        )
    return by_tape


def _last_loss_write(
    model: Model, writes: list[tuple[int, int, int]] | None, losses: list[int], start: int, begin: int
) -> int:
    """Event index of the last recorded write into a loss array in (start, begin), -1 if none."""
    if not writes:
        return -1
    infos = [model.arrays[a] for a in losses]
    i = bisect.bisect_left(writes, (begin, -1, -1))
    while i > 0:
        i -= 1
        seq, ev, array_id = writes[i]
        if seq <= start:
            break
        written = model.arrays.get(array_id)
        if written is not None and any(overlaps(written, info) for info in infos):
            return ev
    return -1


def _loss_arrays(model: Model, begin_ev: int) -> list[int]:
    losses = []
    if model.array_id[begin_ev] >= 0:
        losses.append(int(model.array_id[begin_ev]))
    detail = model.detail(begin_ev)
    keys: list[object] = []
    if isinstance(detail, list):
        keys = detail
    elif isinstance(detail, dict):
        keys = list(detail.get("grads", detail.keys()) if "grads" in detail else detail.keys())
    for item in keys:
        try:
            array_id = int(item)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            continue
        if array_id in model.arrays and array_id not in losses:
            losses.append(array_id)
    return [a for a in losses if a in model.arrays]


# ---------------------------------------------------------------- kernel source facts
# Two questions the per-argument facts (first read line, first write line) cannot answer
# alone, answered from the kernel source stored in the trace. Both answer conservatively
# (report) when the source is missing or holds something they do not understand.


def _store_after_read(kernel: KernelInfo | None, arg: str, field_path: str) -> bool:
    """Does the kernel store into ``arg[.field]`` after reading it?

    ``y[i] = f(x); h = y[i]`` (store first, then read back) is fine: the replay stores the
    same value again. Only a read followed by a plain store loses the value the adjoint
    needs. The facts give the first read and first write lines; when the first write comes
    first, the kernel source after the first read decides (a store there, or the array
    handed to a function call, counts as a later store)."""
    if kernel is None:
        return True
    fact = kernel.arg(arg, field_path)
    if fact is None or fact.read_line < 0 or fact.write_line < 0 or fact.read_line <= fact.write_line:
        return True
    model = kernel.source_model
    if model.kernel_line_text(fact.read_line) is None:
        return True  # read inside a @wp.func callee: its statements are not in the kernel source
    return model.stores_after(fact.read_line, _field_path(arg, field_path))


def _grad_args(
    model: Model, ev: int, cache: dict[tuple, frozenset[str] | None] | None = None
) -> frozenset[str] | None:
    """Argument paths (``x``, ``state.q``) of a launch whose arrays carry a gradient then;
    None when some access cannot be resolved (then every array counts). ``cache`` memoizes the
    result per access signature (array ids, argument paths, which arrays have a gradient)."""
    seq = int(model.seq[ev])
    start, stop = int(model.acc_start[ev]), int(model.acc_stop[ev])
    arrays = model.acc_array[start:stop]
    if cache is None or stop <= start:
        cache = {}
    known = cache.get(("known", arrays.tobytes()))
    if known is None:
        known = cache[("known", arrays.tobytes())] = all(a in model.arrays for a in arrays.tolist())
    if not known:
        return None
    has = model.dataflow.has_grad_many(arrays, np.full(len(arrays), seq, dtype=np.int64))
    key = (
        arrays.tobytes(),
        np.asarray(model.acc_arg_code[start:stop]).tobytes(),
        np.asarray(model.acc_field_code[start:stop]).tobytes(),
        has.tobytes(),
    )
    cached = cache.get(key, False)
    if cached is not False:
        return cached
    paths = set()
    for i, row in enumerate(range(start, stop)):
        if has[i]:
            paths.add(_field_path(model.acc_arg[row], model.acc_field[row]))
    result = cache[key] = frozenset(paths)
    return result


def _adjoint_needs_value(
    kernel: KernelInfo | None, arg: str, field_path: str, grad_args: frozenset[str] | None = None
) -> bool:
    """Does the adjoint of this kernel depend on the values it read from ``arg[.field]``?

    False only when every use of those values is provably linear (sums, differences,
    products with values that do not depend on arrays, linear atomics, stores), e.g.
    ``q[i] += DT * qd[i]``. Then an accumulation into that array after the launch leaves
    the launch's gradient intact."""
    if kernel is None or not kernel.source:
        return True
    array_params = tuple(a.name for a in kernel.args if a.is_array or a.field)
    active = array_params if grad_args is None else tuple(sorted(grad_args))
    return kernel.source_model.adjoint_needs_value(_field_path(arg, field_path), array_params, active)
