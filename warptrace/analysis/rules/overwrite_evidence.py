"""Evidence and phrasing shared by the overwrite rules (WT101-WT105): grouping occurrences
by root cause, in-place accesses, gradient buffers, buffer names, and what the kernel
source says about a store after a read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from warptrace.analysis.dataflow import Dataflow, combine_codes
from warptrace.analysis.dataflow.base import isin_ids
from warptrace.analysis.findings import Finding, Location, RuleInfo, Severity
from warptrace.analysis.library import buffer_owner, kept_buffer_fix, library_site
from warptrace.analysis.model import ArrayInfo, K, KernelInfo, Model
from warptrace.analysis.numerics import numerics_of
from warptrace.analysis.rules.common import arg_path, finding, quote, shared
from warptrace.trace import schema as S

EXAMPLES = 5  # seqs kept as evidence per finding


def site_line(model: Model, site: int) -> str:
    loc = model.location(site)
    return f"line {loc.line}" if loc.line else "an unknown line"


def append_loc(related: list[Location], loc: Location | None) -> None:
    if loc is not None and loc.line > 0 and loc not in related:
        related.append(loc)


def grad_mask(model: Model, array_ids: np.ndarray, flags: np.ndarray) -> np.ndarray:
    grads = model.grad_array_ids
    is_grad = isin_ids(array_ids, grads) if len(grads) else np.zeros(len(array_ids), dtype=bool)
    return is_grad | ((flags & S.FLAG_GRAD) != 0)


def read_write_masks(model: Model, rows: Any, write_kind: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per access row of ``rows`` (an index array or a slice): whether it is a read, and a write by
    an event of a ``write_kind`` (a mask per event), that WT101/WT103/WT104 follow: the row of an
    event, not of a gradient buffer, of known memory. An event's own rows decide."""
    ev, role = model.acc_ev[rows], model.acc_role[rows]
    ok = (ev >= 0) & ~grad_mask(model, model.acc_array[rows], model.acc_flags[rows])
    ok &= model.acc_alloc[rows] >= 0
    write = ok & ((role & S.ROLE_WRITE) != 0) & write_kind[np.maximum(ev, 0)]
    return ok & ((role & S.ROLE_READ) != 0), write


def kernel_arg_fact(model: Model, kernel_id: int, arg: str, field_path: str, attr: str) -> bool | None:
    kernel = model.kernels.get(int(kernel_id))
    if kernel is None:
        return None
    fact = kernel.arg(arg, field_path)
    if fact is None:
        return None
    return bool(getattr(fact, attr))


def read_store_rows(
    model: Model, ev_rows: np.ndarray, uncertain: bool, writes: int = S.FLAG_STORE
) -> np.ndarray:
    """Access rows of recorded forward launches that read and store the same array (not a
    gradient buffer): proven accesses, or with ``uncertain`` the recorder's guesses
    (FLAG_UNCERTAIN: what native code may do). ``writes``: the write flags that count
    (FLAG_STORE | FLAG_ACCUMULATE: additive updates too)."""
    decided = model.decided_rows  # a row's own columns decide: the copies of a replay take its template's
    flags = model.acc_flags[decided]
    mask = (model.acc_role[decided] == S.ROLE_READWRITE) & ((flags & writes) != 0)
    mask &= ((flags & S.FLAG_UNCERTAIN) != 0) == uncertain
    mask &= ev_rows[decided] >= 0
    if isinstance(decided, slice) or not mask.any():
        rows = np.nonzero(mask)[0]
    else:
        every_row = np.zeros(len(ev_rows), dtype=bool)
        every_row[decided] = mask
        model.fill_row_copies(every_row)
        rows = np.nonzero(every_row)[0]
    rows = rows[recorded_forward_launch(model, ev_rows[rows])]
    if len(rows):
        rows = rows[~grad_mask(model, model.acc_array[rows], model.acc_flags[rows])]
    return rows


def in_place_rows(model: Model, ev_rows: np.ndarray) -> np.ndarray:
    """Access rows (of recorded forward launches) that read and plainly store the same array: WT102/WT104."""
    rows = read_store_rows(model, ev_rows, uncertain=False)
    keep = []
    for row in rows.tolist():
        kernel_id = int(model.kernel[ev_rows[row]])
        arg, field_path = model.acc_arg[row], model.acc_field[row]
        read = kernel_arg_fact(model, kernel_id, arg, field_path, "read")
        store = kernel_arg_fact(model, kernel_id, arg, field_path, "store")
        if read is False or store is False:
            continue  # the kernel facts say the access is not a read-then-store
        if not store_after_read(model.kernels.get(kernel_id), arg, field_path):
            continue  # stores first and reads its own result back: the replay is identical
        keep.append(row)
    return np.asarray(keep, dtype=np.int64)


def recorded_forward_launch(model: Model, evs: np.ndarray) -> np.ndarray:
    """Whether each event of ``evs`` is a forward launch recorded on a tape (the mask over all
    events computed once per model, then gathered)."""
    mask = shared(model, "recorded_forward_launch", _recorded_forward_launches)
    return mask[evs]


def _recorded_forward_launches(model: Model) -> np.ndarray:
    return (
        (model.kind == K[S.LAUNCH])
        & model.recorded
        & ~model.adjoint
        & (model.phase == S.FORWARD)
        & (model.tape >= 0)
    )


@dataclass
class Group:
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
        if len(self.write_seqs) < EXAMPLES:
            self.write_seqs.append(write_seq)
            self.read_seqs.append(read_seq)
        if len(self.array_ids) < 4 * EXAMPLES:
            self.array_ids.update(array_ids)
        if len(self.alloc_ids) < EXAMPLES:
            self.alloc_ids.add(alloc)

    def add_many(
        self,
        severity: Severity,
        write_seqs: np.ndarray,
        read_seqs: np.ndarray,
        read_arrays: np.ndarray,
        write_arrays: np.ndarray,
        allocs: np.ndarray,
    ) -> None:
        """:meth:`add` of each occurrence in turn (``severity``: the worst of theirs): only the
        first appearance of an array pair or allocation can change the sets, so those are added
        in order until the sets are full."""
        self.count += len(write_seqs)
        self.severity = max(self.severity, severity)
        room = EXAMPLES - len(self.write_seqs)
        if room > 0:
            self.write_seqs.extend(write_seqs[:room].tolist())
            self.read_seqs.extend(read_seqs[:room].tolist())
        pairs = np.stack((read_arrays, write_arrays), axis=1)
        _, first = np.unique(pairs, axis=0, return_index=True)
        for read_array, write_array in pairs[np.sort(first)].tolist():
            if len(self.array_ids) >= 4 * EXAMPLES:
                break
            self.array_ids.update((read_array, write_array))
        _, first = np.unique(allocs, return_index=True)
        for alloc in allocs[np.sort(first)].tolist():
            if len(self.alloc_ids) >= EXAMPLES:
                break
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


def grouped_finding(info: RuleInfo, group: Group, message: str, location: Location, related: list[Location], key: tuple,
             **evidence: object) -> Finding:  # fmt: skip
    return finding(
        info,
        group.severity,
        message,
        location,
        related=related,
        count=group.count,
        evidence=group.evidence(**evidence),
        key=key,
    )


def buffer_name(model: Model, array_id: int, arg: str) -> str:
    """The user's name for a buffer: its label, else where it was allocated, else the argument."""
    label = model.array_label(array_id)
    if not label.startswith("array#"):
        return quote(label)
    loc = model.location(model.allocation_site(array_id))
    if loc.line:
        return f"the array allocated at line {loc.line}"
    return f"the array passed as {quote(arg)}"


def store_after_read(kernel: KernelInfo | None, arg: str, field_path: str) -> bool:
    """Does the kernel store into ``arg[.field]`` after reading it?

    ``y[i] = f(x); h = y[i]`` (store first, then read back) is fine: the replay stores the
    same value again. Only a read followed by a plain store loses the value the adjoint
    needs. The facts give the first read and first write lines; when the first write comes
    first, the kernel source after the first read decides (a store there, or the array
    handed to a function call, counts as a later store). A kernel that only hands the array
    to ``@wp.func`` callees that each store first is fine the same way
    (:meth:`KernelSource.stores_first_in_calls`)."""
    if kernel is None:
        return True
    model = kernel.source_model
    if not field_path and model.stores_first_in_calls(arg):
        return False  # the same, inside the @wp.func callees the array is handed to
    fact = kernel.arg(arg, field_path)
    if fact is None or fact.read_line < 0 or fact.write_line < 0 or fact.read_line <= fact.write_line:
        return True
    if model.kernel_line_text(fact.read_line) is None:
        return True  # read inside a @wp.func callee: its statements are not in the kernel source
    return model.stores_after(fact.read_line, arg_path(arg, field_path))


def grad_args_many(model: Model, df: Dataflow, evs: np.ndarray) -> dict[int, frozenset[str] | None]:
    """Per event of ``evs``, the argument paths (``x``, ``state.q``) of the launch whose arrays
    carry a gradient then; None when some access cannot be resolved (then every array counts).
    One :meth:`has_grad_many` over all their access rows, and one set built per distinct
    (argument codes with a gradient) signature."""
    evs = np.unique(np.asarray(evs, dtype=np.int64))
    if not len(evs):
        return {}
    starts, stops = model.acc_start[evs], model.acc_stop[evs]
    lengths = np.maximum(stops - starts, 0)
    owner = np.repeat(np.arange(len(evs), dtype=np.int64), lengths)  # event slot of each row
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    rows = np.arange(int(bounds[-1]), dtype=np.int64) - np.repeat(bounds[:-1] - starts, lengths)
    arrays = model.acc_array[rows]
    known_ids = np.fromiter(model.arrays, dtype=np.int64, count=len(model.arrays))
    unknown = np.bincount(owner[~np.isin(arrays, known_ids)], minlength=len(evs)) > 0
    has = df.has_grad_many(arrays, model.seq[evs][owner])
    has &= ~unknown[owner]
    # per event, the (argument, field) codes of its rows with a gradient, in row order: events with
    # equal sequences have equal path sets
    hit = np.nonzero(has)[0]
    pair = model.acc_arg_code[rows[hit]].astype(np.int64) * (int(model.acc_field_code.max(initial=0)) + 1)
    pair += model.acc_field_code[rows[hit]]
    hit_owner = owner[hit]
    counts = np.bincount(hit_owner, minlength=len(evs))
    slot_of = np.full(len(evs), -1, dtype=np.int64)  # signature index per event
    signatures: list[frozenset[str]] = []
    empty_slots = np.nonzero(counts == 0)[0]
    if len(empty_slots):
        slot_of[empty_slots] = len(signatures)
        signatures.append(frozenset())
    first_row = np.concatenate([[0], np.cumsum(counts)])  # hit rows are grouped by event, in row order
    for length in np.unique(counts[counts > 0]).tolist():
        slots = np.nonzero(counts == length)[0]
        index = first_row[slots][:, None] + np.arange(length, dtype=np.int64)[None, :]
        codes = combine_codes([pair[index[:, k]] for k in range(length)])
        _, witness, inverse = np.unique(codes, return_index=True, return_inverse=True)
        base = len(signatures)
        for w in index[witness, 0].tolist():
            sig_rows = rows[hit[w : w + length]].tolist()
            signatures.append(frozenset(arg_path(model.acc_arg[r], model.acc_field[r]) for r in sig_rows))
        slot_of[slots] = base + inverse.reshape(-1)
    return {
        ev: (None if lost else signatures[slot])
        for ev, lost, slot in zip(evs.tolist(), unknown.tolist(), slot_of.tolist())
    }


def adjoint_needs_value(
    kernel: KernelInfo | None, arg: str, field_path: str, grad_args: frozenset[str] | None = None
) -> bool:
    """Does the adjoint of this kernel depend on the values it read from ``arg[.field]``?

    False only when every use of those values is provably linear (sums, differences,
    products with values that do not depend on arrays, linear atomics, stores), e.g.
    ``q[i] += DT * qd[i]``. Then an accumulation into that array after the launch leaves
    the launch's gradient intact. False too when no argument of the launch carries a gradient
    (``grad_args`` empty): its adjoint then propagates nothing."""
    if grad_args is not None and not grad_args:
        return False
    if kernel is None or not kernel.source:
        return True
    array_params = tuple(a.name for a in kernel.args if a.is_array or a.field)
    active = array_params if grad_args is None else tuple(sorted(grad_args))
    return kernel.source_model.adjoint_needs_value(arg_path(arg, field_path), array_params, active)


def closed_row_copies(
    model: Model, copies: list[tuple[int, int, int]], read_rows: np.ndarray, read_bwd: np.ndarray
) -> tuple[list[tuple[int, int, int]], np.ndarray]:
    """The replay copies whose reads at risk are their template's, and the access rows of the
    others. A copy's reads, backward and the writes between them are its template's, moved,
    only when every pending read of the template is backpropagated inside the template's own
    rows (a captured backward). A forward captured alone and backpropagated eagerly after the
    replay (or only after a later one) has its backward, and the host writes before it,
    outside the replay: each replay of such a template is looked at by itself."""
    closed: dict[int, bool] = {}
    keep: list[tuple[int, int, int]] = []
    own: list[np.ndarray] = []
    for start, stop, template in copies:
        stop_t = template + stop - start
        ok = closed.get(template)
        if ok is None:
            a, b = np.searchsorted(read_rows, [template, stop_t])
            last = int(model.acc_seq[stop_t - 1])
            bwd = read_bwd[a:b]
            ok = closed[template] = bool(np.all((bwd >= 0) & (bwd <= last)))
        if ok:
            keep.append((start, stop, template))
        else:
            own.append(np.arange(start, stop, dtype=np.int64))
    return keep, (np.concatenate(own) if own else np.zeros(0, dtype=np.int64))


def copy_window(model: Model, ev: int, dest: int) -> tuple[int, int] | None:
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


def overlaps_window(info: ArrayInfo, window: tuple[int, int]) -> bool:
    low, high = window
    hull_low, hull_high = info.hull
    if hull_high <= low or high <= hull_low:
        return False
    offsets = info.element_offsets()
    if offsets is None:
        return True
    return bool(np.any((offsets < high) & (offsets + info.itemsize > low)))


def writer_phrase(model: Model, ev: int, row: int, subject: str) -> str:
    kind = int(model.kind[ev])
    path = quote(arg_path(model.acc_arg[row], model.acc_field[row]))
    if kind in (K[S.LAUNCH], K[S.CMD_LAUNCH]):
        what = "the adjoint of kernel" if model.adjoint[ev] else "kernel"
        phrase = f"{what} {quote(model.kernel_name(ev))}"
        if kind == K[S.CMD_LAUNCH]:
            phrase = f"a replayed Launch object (record_cmd=True) of kernel {quote(model.kernel_name(ev))}"
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
    return f"the native utility {quote(name)}" if name else "a native Warp utility"


def how_unrecorded(model: Model, write_ev: int, read_tape: int) -> str:
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


def alias_clause(
    model: Model, r_array: int, r_arg: str, w_array: int, w_arg: str, read_ev: int, write_ev: int
) -> str:
    """Explain why the write lands on the read memory when the program names it differently."""
    labels = model.aliases([r_array, w_array])
    names = ", ".join(quote(name) for name in labels)
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
            f"; the same array is passed as {quote(r_arg)} and later as {quote(w_arg)}: buffers used in turn "
            "(ping-pong) or a rebinding such as `states[0] = states[-1]` make an earlier step's input a later "
            "step's output"
        )
        return clause + (f" (names of this memory: {names})" if names else "")
    if len(labels) > 1:
        return f"; this memory is known under several names: {names}"
    return ""


def unchanged_and_owner_clauses(
    model: Model, group: Group, subject: str, read_array: int, write_ev: int, read_ev: int
) -> tuple[str, str]:
    """What WT101/WT104 add about the values and the owner of an overwritten buffer: (message
    clauses, a fix replacing the rule's, or ""). An error whose overwrites the value summaries
    prove unchanged becomes a warning (``group.severity`` lowered); a buffer a library made and
    overwrites in its own code is named with the library object that keeps it."""
    message, fix = "", ""
    if group.severity == Severity.ERROR and group.code != "WT103" and _rewrites_same_values(model, group):
        group.severity = Severity.WARNING
        message += (
            "; the value summaries (--check-numerics) show that each overwrite stored the very bytes the "
            "reader saw, so today's gradient is right, but the first overwrite that changes them breaks it "
            "(the fix is the same)"
        )
    owner = buffer_owner(model, read_array) if library_site(model, int(model.site[write_ev])) >= 0 else None
    if owner is not None:  # a library overwrites a buffer it made: say which object keeps it
        message += f"; {subject} belongs to the library: {owner.phrase()}"
        if owner.owner_class:
            fix = kept_buffer_fix(owner)
        elif (
            group.severity == Severity.ERROR
            and group.code == "WT101"
            and library_site(model, int(model.site[read_ev])) >= 0
        ):
            # read and overwrite both inside the library, on memory it handed to the program
            # (a state it returned) rather than keeps: no line of the program's changes it, and
            # without values the trace cannot tell a change from a recomputation of the same
            # values (a solver refreshing its input state's poses)
            group.severity = Severity.WARNING
            message += (
                f"; both the read and the overwrite are made inside {owner.library}, on memory it returned to "
                "your code, so no change at your line avoids them: whether the overwrite changes the values the "
                "adjoint needs (a library bug) or recomputes the same ones (harmless) is for the value "
                "summaries to tell (--check-numerics)"
            )
    return message, fix


def _rewrites_same_values(model: Model, group: Group) -> bool:
    """With value summaries (``--check-numerics``): whether every overwrite kept as an example
    stored the same bytes the memory held before it (the summary hash of each written array
    after the write equals its summary before), e.g. a solver recomputing a state's body poses
    from the same coordinates. Without summaries: False."""
    numerics = numerics_of(model)
    if numerics is None or not group.write_seqs:
        return False
    for seq in group.write_seqs:
        written = [
            row for row in numerics.by_seq.get(int(seq), ())
            if row.what == S.NUM_WRITE and row.array_id in group.array_ids
        ]  # fmt: skip
        if not written:
            return False
        for row in written:
            before = numerics.before(row.array_id, int(seq))
            if before is None or not row.hash or before.hash != row.hash or before.count != row.count:
                return False
    return True
