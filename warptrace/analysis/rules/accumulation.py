"""Gradient accumulation (WT201-WT203): adjoints added twice, or added onto stale gradients.

Adjoints *accumulate* into ``.grad`` buffers. Since Warp 1.13 a plain store's adjoint
also *consumes* (zeroes) the output gradient after reading it, so only the last write
to an element passes gradient on; ``retain_grad=True`` turns that consumption off for
one array object. These rules prove, from the recorded launches and the order of tape
events, that an adjoint is counted twice or lands on top of an old gradient:

WT201 duplicate-launch (error, or info)
    The same kernel is recorded twice on one tape over the same memory (same arrays
    per argument, same launch dimensions), nothing it reads was written in between,
    and it only stores (no ``+=``/atomics): the second launch recomputes exactly what
    the first one wrote. A leftover line or two overlapping helper calls. When a
    written array keeps its gradient (``retain_grad=True`` at the backward) or the
    trace comes from Warp older than 1.13, the backward adds the adjoint twice and
    every gradient upstream of that array doubles (error). Otherwise the second
    store's adjoint consumes the output gradient and the gradient is right (info: a
    redundant launch that breaks as soon as someone sets ``retain_grad``).
    Not reported: the same kernel every step of a time loop on new memory, after its
    inputs were rewritten, or accumulating into its outputs.
    Fix: delete the duplicate launch (or the second helper call).

WT202 retain-grad-multiwrite (error)
    An array object with ``retain_grad=True`` is overwritten on a tape that is
    backpropagated while an earlier recorded launch or copy on the same tape wrote
    the same elements, or one kernel stores the same element twice (``y[i] = a`` then
    ``y[i] = b``, read from the kernel source). The second write's adjoint does not
    consume ``y.grad``, so the overwritten first write also receives it: its inputs
    get gradient for a value that never reached the loss (an exact 2x on the
    elements written twice when both writes compute the same thing).
    Fix: write each value to its own array and keep ``retain_grad`` only on arrays
    written once (or compute the final value in a local and store it once).

WT203 grad-not-zeroed (error)
    Two backward calls (of any tapes) accumulate into the same ``.grad`` buffers, the
    parameters owning them are written in between (an optimizer step), nothing
    zeroed those buffers in between (``tape.zero()``, ``tape.reset()``, ``zero_()``,
    a fresh ``.grad``), and the accumulated buffer is read afterwards: the optimizer
    consumes the running sum of gradients taken at different parameter values.
    Deliberate accumulation of one objective over several backward calls with the
    parameters unchanged (micro-batches, checkpoint segments) is not reported.
    Fix: call ``tape.zero()`` (or zero the ``.grad`` arrays) after each optimizer
    step, before the next backward.

Warp documentation: "Differentiability", section "Gradient accumulation"
(``Tape.zero``, ``retain_grad``) and "Debugging Gradients".

Findings are grouped by root cause (the user line to change) with a count: a bug in a
training loop is one finding whose count is the number of iterations it hit.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from warptrace.analysis.dataflow import BackwardCall, Dataflow, combine_codes
from warptrace.analysis.findings import Finding, Location, RuleInfo, Severity
from warptrace.analysis.model import K, KernelInfo, Model
from warptrace.trace import schema as S

DOC_ACCUMULATION = "Differentiability > Gradient accumulation"

RULES = (
    RuleInfo(
        code="WT201",
        name="duplicate-launch",
        family="accumulation",
        fix="delete the duplicate launch (or the second call of the helper that launches it)",
        doc=DOC_ACCUMULATION,
    ),
    RuleInfo(
        code="WT202",
        name="retain-grad-multiwrite",
        family="accumulation",
        fix="write each value to its own array, or store the final value once from a local; keep "
        "retain_grad=True only on arrays written once per tape",
        doc=DOC_ACCUMULATION,
    ),
    RuleInfo(
        code="WT203",
        name="grad-not-zeroed",
        family="accumulation",
        fix="call tape.zero() (or zero the parameters' .grad arrays) after each optimizer step, before "
        "the next backward",
        doc=DOC_ACCUMULATION + "; Debugging Gradients",
    ),
)
_INFO = {info.code: info for info in RULES}


def check(model: Model) -> list[Finding]:
    """Run WT201, WT202 and WT203 over the model."""
    duplicates = _duplicate_pairs(model)
    findings = _wt201(model, duplicates)
    findings += _wt202(model, {(first, second) for first, second, _ in duplicates})
    findings += _wt203(model)
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


def _names(labels: list[str]) -> str:
    unique = list(dict.fromkeys(label for label in labels if label))
    return ", ".join(f"`{label}`" for label in unique) or "an array"


# ---------------------------------------------------------------- WT201
def _launch_signatures(model: Model, df: Dataflow, evs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The launches among ``evs`` that can be duplicates (they write, and no write accumulates or
    also reads: relaunching those changes memory), and for each an id of what makes two launches
    the same computation over the same memory: the kernel, the launch dims and the multiset of
    accesses (argument, field, role, view geometry). Equal ids <=> equal signatures."""
    start, stop = model.acc_start[evs], model.acc_stop[evs]

    def per_event(mask: np.ndarray) -> np.ndarray:
        sums = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(mask, dtype=np.int64)])
        return sums[stop] - sums[start]

    keep = (per_event(df.is_write & (df.is_accumulate | df.is_read)) == 0) & (per_event(df.is_write) > 0)
    evs, counts = evs[keep], (stop - start)[keep]
    if not len(evs):
        return evs, np.zeros(0, dtype=np.int64)
    rows, _ = df.rows_of_events(evs)
    offsets = np.cumsum(counts) - counts

    # view geometry: (alloc, offset, shape, strides), or the array id when the array is unknown
    array_ids, inverse = np.unique(model.acc_array[rows], return_inverse=True)
    interned: dict[object, int] = {}
    codes = np.empty(len(array_ids), dtype=np.int64)
    for i, array_id in enumerate(array_ids.tolist()):
        info = model.arrays.get(array_id)
        geometry = (info.alloc_id, info.offset, info.shape, info.strides) if info else array_id
        codes[i] = interned.setdefault(geometry, len(interned))
    parts = combine_codes(
        [
            codes[inverse.reshape(-1)],
            model.acc_role[rows].astype(np.int64) + 128,
            model.acc_field_code[rows],
            model.acc_arg_code[rows],
        ]
    )
    parts = np.unique(parts, return_inverse=True)[1].reshape(-1)  # dense: few distinct accesses
    what = combine_codes([model.kernel[evs] + 1, model.dim_code[evs] + 1])  # kernel and dims

    # launches with k accesses: [kernel and dims, sorted part codes], equal codes <=> equal signatures
    signatures = np.empty(len(evs), dtype=np.int64)
    next_id = 0
    for k in np.unique(counts).tolist():
        sel = np.nonzero(counts == k)[0]
        table = np.sort(parts[offsets[sel][:, None] + np.arange(k)], axis=1)
        unique, ids = np.unique(combine_codes([what[sel], *table.T]), return_inverse=True)
        signatures[sel] = ids.reshape(-1) + next_id
        next_id += len(unique)
    return evs, signatures


def _duplicate_pairs(model: Model) -> list[tuple[int, int, list[int]]]:
    """(first launch, duplicate launch, written access rows of the duplicate) on one tape epoch."""
    df = model.dataflow
    launches = np.nonzero((df.ev_epoch >= 0) & (model.kind == K[S.LAUNCH]))[0]
    evs, signatures = _launch_signatures(model, df, launches)
    if len(evs) < 2:
        return []
    # each launch and the latest earlier launch with its signature on the same epoch
    epochs = df.ev_epoch[evs]
    order = np.lexsort((evs, signatures, epochs))
    evs, signatures, epochs = evs[order], signatures[order], epochs[order]
    same = (epochs[1:] == epochs[:-1]) & (signatures[1:] == signatures[:-1])
    firsts, seconds, epochs = evs[:-1][same], evs[1:][same], epochs[1:][same]
    order = np.lexsort((seconds, epochs))  # epochs in order, launches in order within each
    pairs = []
    for first, ev in zip(firsts[order].tolist(), seconds[order].tolist()):
        first_seq = int(model.seq[first])
        unchanged = True
        for row in range(int(model.acc_start[ev]), int(model.acc_stop[ev])):
            if df.is_read[row] and any(
                int(model.seq[df.acc_ev[w]]) >= first_seq for w in df.writer_rows(row).tolist()
            ):
                unchanged = False
                break
        if unchanged:
            written = [r for r in range(int(model.acc_start[ev]), int(model.acc_stop[ev])) if df.is_write[r]]
            pairs.append((first, ev, written))
    return pairs


def _wt201(model: Model, pairs: list[tuple[int, int, list[int]]]) -> list[Finding]:
    df = model.dataflow
    old_warp = (1, 0) <= model.warp_version < (1, 13)
    findings = []
    for first, ev, written in pairs:
        call = df.backward_of_event(ev)
        when = call.begin_seq if call else int(model.seq[ev])
        kernel = model.kernel_name(ev)
        outputs = [model.array_label(int(model.acc_array[r]), model.acc_arg[r]) for r in written]
        retained = [
            model.array_label(int(model.acc_array[r]), model.acc_arg[r])
            for r in written
            if df.has_grad(int(model.acc_array[r]), when) and df.retains_grad(int(model.acc_array[r]), when)
        ]
        flows = any(
            df.is_read[r] and df.has_grad(int(model.acc_array[r]), when) and not df.grad_row_mask[r]
            for r in range(int(model.acc_start[ev]), int(model.acc_stop[ev]))
        )
        first_where = (
            "first by the same call, reached twice"
            if int(model.site[first]) == int(model.site[ev])
            else f"first at line {model.event_location(first).line}"
        )
        doubled = call is not None and flows and (retained or old_warp)
        if doubled:
            why = (
                f"{_names(retained)} keeps its gradient (retain_grad=True), so the second store's adjoint does "
                "not consume it"
                if retained
                else f"on Warp {'.'.join(map(str, model.warp_version))} (< 1.13) stores do not consume "
                "output gradients"
            )
            message = (
                f"`{kernel}` is recorded twice on the tape over the same memory with unchanged inputs "
                f"({first_where}); {why}, and the backward adds its adjoint twice: every "
                f"gradient upstream of {_names(outputs)} doubles"
            )
            severity = Severity.ERROR
        else:
            message = (
                f"`{kernel}` is recorded twice on the tape over the same memory with unchanged inputs "
                f"({first_where}): the second launch recomputes {_names(outputs)}. Gradients are "
                "right here because the second store's adjoint consumes the output gradient (Warp >= 1.13), "
                "but they double with retain_grad=True on the output or on older Warp"
            )
            severity = Severity.INFO
        findings.append(
            _finding(
                "WT201",
                severity,
                message,
                model.event_location(ev, "duplicate launch"),
                related=[model.event_location(first, "first launch")]
                + ([model.location(call.site, "backward")] if call else []),
                evidence={
                    "first_seq": int(model.seq[ev]),
                    "launch_seqs": [int(model.seq[first]), int(model.seq[ev])],
                },
                key=(int(model.site[first]), int(model.site[ev]), int(model.kernel[ev]), severity),
            )
        )
    return findings


# ---------------------------------------------------------------- WT202
def _wt202(model: Model, duplicates: set[tuple[int, int]]) -> list[Finding]:
    df = model.dataflow
    retaining = {a for a, info in model.arrays.items() if info.retain_grad} | set(df._retain)
    if not retaining:
        return []
    findings = []
    rows = np.nonzero(
        np.isin(model.acc_array, np.fromiter(retaining, dtype=np.int64)) & df.is_store & ~df.is_uncertain
    )[0]
    for row in rows.tolist():
        ev = int(df.acc_ev[row])
        epoch = df.epoch_of(ev)
        if epoch is None or model.kind[ev] not in (K[S.LAUNCH], K[S.COPY]):
            continue
        call = df.first_backward(epoch, int(model.seq[ev]))
        array_id = int(model.acc_array[row])
        if call is None or not (
            df.has_grad(array_id, call.begin_seq) and df.retains_grad(array_id, call.begin_seq)
        ):
            continue
        label = model.array_label(array_id, model.acc_arg[row])
        # an earlier write on the same tape epoch whose adjoint would also receive the gradient
        earlier = [
            w
            for w in df.writes_between(
                array_id, int(model.seq[epoch.events[0]]) - 1, int(model.seq[ev])
            ).tolist()
            if df.ev_epoch[df.acc_ev[w]] == epoch.uid and not df.is_uncertain[w]
        ]
        first = int(df.acc_ev[earlier[-1]]) if earlier else -1
        if first >= 0 and (first, ev) not in duplicates and _propagates(model, df, first, call.begin_seq):
            findings.append(
                _finding(
                    "WT202",
                    Severity.ERROR,
                    f"`{label}` keeps its gradient (retain_grad=True) and is written twice on the tape: "
                    f"{_what(model, first)} at line {model.event_location(first).line} and {_what(model, ev)} "
                    f"here overwrite the same elements, so the backward passes `{label}.grad` to both and the "
                    f"inputs of the overwritten write get gradient for a value that never reached the loss",
                    model.event_location(ev, "second write"),
                    related=[
                        model.event_location(first, "first write"),
                        model.location(call.site, "backward"),
                    ],
                    evidence={
                        "first_seq": int(model.seq[ev]),
                        "write_seqs": [int(model.seq[first]), int(model.seq[ev])],
                        "array_id": array_id,
                    },
                    key=(int(model.site[first]), int(model.site[ev]), label),
                )
            )
            continue
        if model.kind[ev] != K[S.LAUNCH]:
            continue
        kernel = model.kernels.get(int(model.kernel[ev]))
        lines = _stores_twice(kernel, model.acc_arg[row], model.acc_field[row]) if kernel else None
        if lines and _propagates(model, df, ev, call.begin_seq):
            related = [model.location(call.site, "backward")]
            for line in lines:
                related.append(Location(kernel.file, line, "store", _kernel_text(kernel, line), kernel.key))
            findings.append(
                _finding(
                    "WT202",
                    Severity.ERROR,
                    f"`{kernel.key}` stores the same element of `{label}` twice (kernel lines "
                    f"{', '.join(map(str, lines))}) and `{label}` keeps its gradient (retain_grad=True): the "
                    f"adjoint of the second store does not consume `{label}.grad`, so the overwritten first "
                    "store's adjoint also receives it",
                    model.event_location(ev, "launch"),
                    related=related,
                    evidence={
                        "first_seq": int(model.seq[ev]),
                        "launch_seq": int(model.seq[ev]),
                        "array_id": array_id,
                    },
                    key=(int(model.site[ev]), kernel.kernel_id, model.acc_arg[row], model.acc_field[row]),
                )
            )
    return findings


def _what(model: Model, ev: int) -> str:
    if model.kind[ev] == K[S.LAUNCH]:
        return f"`{model.kernel_name(ev)}`"
    return "a copy"


def _propagates(model: Model, df: Dataflow, ev: int, when: int) -> bool:
    """Whether the adjoint of ``ev`` passes gradient on (it reads an array that has a .grad)."""
    for row in range(int(model.acc_start[ev]), int(model.acc_stop[ev])):
        if df.is_read[row] and not df.grad_row_mask[row] and df.has_grad(int(model.acc_array[row]), when):
            return True
    return False


def _kernel_text(kernel: KernelInfo, line: int) -> str:
    return kernel.source_model.kernel_line_text(line) or ""


def _stores_twice(kernel: KernelInfo, arg: str, field_path: str) -> list[int] | None:
    return kernel.source_model.stores_twice(arg + ("." + field_path if field_path else ""))


# ---------------------------------------------------------------- WT203
def _wt203(model: Model) -> list[Finding]:
    df = model.dataflow
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

    findings = []
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
            _finding(
                "WT203",
                Severity.ERROR,
                f"this backward adds into {_names(grad_labels)}, which still "
                f"{'holds' if len(set(grad_labels)) == 1 else 'hold'} the gradient of the "
                f"previous backward ({previous}) although {_names(owners)} "
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

    # zeroed in between: a plain store outside any backward (a window search over those writes),
    # or a tape zero/reset of a tape whose backward filled it
    grad_alloc, grad_lo, grad_hi = _memory_of(model, grad_ids)
    forward_store = (model.phase[df.acc_ev] == S.FORWARD) & df.is_store
    zeroed = df.first_writes(df.write_index(forward_store), grad_alloc, grad_lo, grad_hi, after, before) >= 0
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
    owner_alloc, owner_lo, owner_hi = _memory_of(model, owners)
    ev = df.acc_ev
    recorded = (
        model.recorded[ev] | (model.phase[ev] != S.FORWARD) | (model.parent[ev] >= 0) | df.grad_row_mask
    )
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


def _memory_of(model: Model, array_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(alloc, lo, hi) of each array object's view (alloc -1 when unknown)."""
    unique, inverse = np.unique(array_ids, return_inverse=True)
    alloc = np.full(len(unique), -1, dtype=np.int64)
    lo = np.zeros(len(unique), dtype=np.int64)
    hi = np.zeros(len(unique), dtype=np.int64)
    for i, array_id in enumerate(unique.tolist()):
        info = model.arrays.get(array_id)
        if info is not None and info.alloc_id >= 0:
            alloc[i] = info.alloc_id
            lo[i], hi[i] = info.hull
    inverse = inverse.reshape(-1)
    return alloc[inverse], lo[inverse], hi[inverse]


def _read_after(model: Model, df: Dataflow, grad_id: int, later: BackwardCall) -> bool:
    """Whether the accumulated grad is used after the later backward (a value read, an optimizer
    kernel, a copy), before it is overwritten."""
    store = df.next_store(grad_id, later.end_seq)
    stop = int(model.acc_seq[store]) if store >= 0 else None
    for row in df.iter_reads(grad_id, later.begin_seq, stop):
        ev = int(df.acc_ev[row])
        if model.phase[ev] == S.FORWARD and int(df.ev_backward[ev]) < 0:
            return True
    return False
