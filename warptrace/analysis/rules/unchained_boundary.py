"""Hand-written checkpointing that seeds only part of the carried state (WT303).

WT303 unchained-boundary
    Summary: hand-written checkpointing that seeds only part of the carried state
    Severity: error
    Proves:
        Hand-written gradient checkpointing: a segment is replayed on a new tape and
        backpropagated after the later segment, and its backward is seeded with the later
        segment's adjoints for some of the state it hands over (a copy/assign/fill into
        ``.grad``, or ``grads=``) but not for another carried array. The gradient through the
        unseeded state is dropped at every boundary.
    Mechanism:
        Each segment's tape knows nothing of the next one: the only link is the adjoint the
        program copies into the boundary arrays' ``.grad`` before the segment's backward. A
        carried array (a velocity next to a position) whose adjoint is not handed over starts
        the earlier segment's backward from zero.
    Evidence:
        For each boundary: the arrays the later segment read from the earlier one, and the
        writes into their ``.grad`` before the earlier segment's backward. Replays are matched
        to the original forward by kernel and arguments, so state recomputed into fresh arrays
        is recognised; checkpoints and adjoints that travel through numpy are linked by their
        content digest.
    Example: wt303_checkpoint
    Fix:
        Seed every carried state array's ``.grad`` before the segment's backward.
    Silent on:
        Checkpointing that hands every carried adjoint over through plain buffers.
    Look-alikes: ok_flow_checkpoint_saved_adjoint
    Warp documentation:
        "Differentiability", sections "Debugging Gradients" and "Limitations and Workarounds";
        ``Tape.backward``.

Findings are grouped by root cause (the user line to change) with a count.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

import numpy as np

from warptrace.analysis.dataflow import BackwardCall, Dataflow, Epoch, combine_codes, dataflow_of
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
    shared,
)
from warptrace.trace import schema as S

WT303 = RuleInfo(
    code="WT303",
    name="unchained-boundary",
    family="flow",
    fix="before each segment's backward, seed the .grad of every state array the segment hands "
    "to the next one with the adjoint the later segment produced for it",
    doc=DOC_LIMITS,
)


def check(model: Model) -> list[Finding]:
    df = dataflow_of(model)
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
        exposed = _exposed(model, df, epoch_b, call_b)
        host_pairs = _host_boundary(model, df, epoch_a, epoch_b, call_b)
        if not any(_seeded_grad(model, df, a, call_a, seeded_grads) for a, _ in host_pairs) and not (
            _may_pair_seeded(model, df, epoch_a, call_a, exposed, seeded_grads)
        ):
            continue  # no pair can be "seeded", so no finding: the boundary walk is not needed
        boundary = _boundary(model, df, epoch_a, exposed)
        through_host = [pair for pair in host_pairs if pair not in boundary]
        boundary += through_host
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
        seeded_labels = [array_label(model, a) for a, _ in explicit]
        missing_labels = [array_label(model, a) for a, _ in missing]
        later_labels = [array_label(model, b) for _, b in missing]
        host_note = ""
        host_missing = [b for pair in missing if pair in through_host for b in pair[1:]]
        if host_missing:
            read_ev = df.host_restored[host_missing[0]][1]
            host_note = (
                f", restored from the host copy taken at line {model.event_location(read_ev).line}: the link "
                "between the segments is the content of that copy"
            )
        seed_events = [ev for ev, _grad, _owner, _src in df.seeds(call_a) if ev != call_a.begin_ev]
        related = [model.event_location(ev, "seed") for ev in seed_events[:3]]
        related.append(model.location(call_b.site, "later segment's backward"))
        message = (
            f"this backward of a replayed segment is seeded with the adjoint of {join_names(seeded_labels)} from "
            f"the later segment's backward (line {model.location(call_b.site).line}) but not with that of "
            f"{join_names(missing_labels)}, which the later segment read (as {join_names(later_labels)}{host_note}): "
            "the gradient through it is dropped at this boundary"
        )
        findings.append(
            finding(
                WT303,
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


class _RowCodes:
    """Per access row: an int code of its memory (equal codes <=> equal :func:`_memory_key`) and
    of its argument path, so that (argument, memory) read signatures are plain ints.

    The codes are looked up for the rows asked about (:meth:`key`, :meth:`path`), through a table
    by array id and the model's small argument/field codes: two int64 columns over every access
    row would add 100 MiB to the analysis' peak on a trace of millions of rows."""

    def __init__(self, model: Model, df: Dataflow) -> None:
        self._df = df
        self._model = model
        self.written: dict[int, dict[int, int]] = {}  # event -> outputs_of(event), cached
        self._writes: tuple[list, list, list, list] | None = None
        # the ids of the rows outside graph replays that copy a template: a copy's rows are its
        # template's (the drone trace: 231,000 of 6.7M rows, not a count over every row)
        ids = model.acc_array[model.decided_rows]
        self._low = int(ids.min()) if len(ids) else 0
        # the ids that occur, ascending (codes are numbered in that order)
        present = np.nonzero(np.bincount(ids - self._low))[0] if len(ids) else np.zeros(0, dtype=np.int64)
        codes: dict[tuple[int, int, int], int] = {}
        key_code = np.array(
            [codes.setdefault(memory_key(model, a), len(codes)) for a in (present + self._low).tolist()],
            dtype=np.int64,
        )
        self._key_of_id = np.zeros(len(present) and int(present[-1]) + 1, dtype=np.int64)
        self._key_of_id[present] = key_code
        self.n_keys = max(len(codes), 1)
        self._arg, self._field = model.acc_arg_code, model.acc_field_code
        self._n_fields = int(self._field.max()) + 1 if len(self._field) else 1
        n_args = int(self._arg.max()) + 1 if len(self._arg) else 1
        # python ints where the combined read code could overflow int64
        self._path_type: type = np.int64 if float(n_args) * self._n_fields * self.n_keys < 2.0**62 else object

    def key(self, rows: np.ndarray) -> np.ndarray:
        """The memory code of each access row of ``rows``."""
        return self._key_of_id[self._model.acc_array[rows] - self._low]

    def path(self, rows: np.ndarray) -> np.ndarray:
        """The argument path code of each access row of ``rows``."""
        arg = self._arg[rows].astype(self._path_type)
        return arg * self._n_fields + self._field[rows].astype(self._path_type)

    def outputs_of(self, ev: int) -> dict[int, int]:
        """Path code -> memory code of the write rows of event ``ev`` (the last row of a path wins)."""
        if self._writes is None:
            rows = np.nonzero(self._df.is_write)[0]
            self._writes = (
                np.searchsorted(rows, self._model.acc_start).tolist(),
                np.searchsorted(rows, self._model.acc_stop).tolist(),
                self.path(rows).tolist(),
                self.key(rows).tolist(),
            )
        first, stop, paths, keys = self._writes
        start, end = first[ev], stop[ev]
        return dict(zip(paths[start:end], keys[start:end]))

    def read_codes(self, rows: np.ndarray, keys: np.ndarray) -> np.ndarray:
        return self.path(rows) * self.n_keys + keys


def _row_codes(model: Model, df: Dataflow) -> _RowCodes:
    return shared(model, "wt303_row_codes", lambda m: _RowCodes(m, df))


def _content_key(model: Model, evs: np.ndarray) -> bytes:
    """Equal for two event lists that are copies of the same recorded events in the same order
    (graph replays: :attr:`Model.orig_seq`), whose access rows are therefore the same."""
    return bytes(model.orig_seq[evs].tobytes())


def _exposed(model: Model, df: Dataflow, epoch_b: Epoch, call_b: BackwardCall) -> dict[int, int]:
    """Segment B's exposed inputs: memory code -> array, for memory B's objective reads before B
    writes it (by an earlier event). Computed once per content (:func:`_content_key`) and
    objective membership of B's events: the replays of a captured graph share it."""
    objective_b = df.objective_events(call_b)
    evs_b = np.asarray(epoch_b.events, dtype=np.int64)
    in_objective = np.fromiter(map(objective_b.__contains__, epoch_b.events), dtype=bool, count=len(evs_b))
    cache: dict[tuple[bytes, bytes], dict[int, int]] = shared(model, "wt303_exposed", lambda m: {})
    key = (_content_key(model, evs_b), in_objective.tobytes())
    found = cache.get(key)
    if found is None:
        found = cache[key] = _exposed_inputs(model, df, evs_b, in_objective)
    return found


def _exposed_inputs(
    model: Model, df: Dataflow, evs_b: np.ndarray, in_objective: np.ndarray
) -> dict[int, int]:
    """:func:`_exposed` of events ``evs_b`` (in order), ``in_objective`` telling which of them are
    on B's backward slice."""
    codes = _row_codes(model, df)
    rows, index = df.rows_of_events(evs_b)
    if len(rows) == 0:
        return {}
    keys_b = codes.key(rows)
    unique, inverse = np.unique(keys_b, return_inverse=True)
    inverse = inverse.reshape(-1)
    writes = df.is_write[rows]
    first_write = np.full(len(unique), len(evs_b), dtype=np.int64)
    np.minimum.at(first_write, inverse[writes], index[writes])
    exposed_rows = np.nonzero(df.is_read[rows] & in_objective[index] & (first_write[inverse] >= index))[0]
    if len(exposed_rows) == 0:
        return {}
    slots, first = np.unique(inverse[exposed_rows], return_index=True)
    return dict(zip(unique[slots].tolist(), model.acc_array[rows[exposed_rows[first]]].tolist()))


def _may_pair_seeded(
    model: Model,
    df: Dataflow,
    epoch_a: Epoch,
    call_a: BackwardCall,
    exposed: dict[int, int],
    seeded: dict[tuple[int, int, int], int],
) -> bool:
    """Whether :func:`_boundary` could pair an array with a hand-seeded gradient (False proves
    it cannot). A write of A pairs when the memory it maps to is exposed in B: its own, or
    (:func:`_boundary` maps outputs to the original launch's) one that a forward launch of the
    kernel of some write of A to the same memory wrote at that write's argument path."""
    if not exposed:
        return False
    evs_a = np.asarray(epoch_a.events, dtype=np.int64)
    cache: dict[tuple[bytes, tuple[int, ...]], list[int]] = shared(
        model, "wt303_pair_candidates", lambda m: {}
    )
    key = (_content_key(model, evs_a), tuple(exposed))
    candidates = cache.get(key)
    if candidates is None:
        candidates = cache[key] = _pair_candidates(model, df, evs_a, exposed)
    # only an array whose .grad was ever seeded memory can be seeded at call_a: that set test
    # first (once per candidates and seeded memory: the replays share them), the exact test (the
    # gradient at call_a) for those that pass
    passing_of: dict[tuple, list[int]] = shared(model, "wt303_seedable", lambda m: {})
    seeded_keys = seeded.keys()
    passing_key = (key, frozenset(seeded_keys))
    passing = passing_of.get(passing_key)
    if passing is None:
        grad_keys = _grad_keys_ever(model, df)
        passing = passing_of[passing_key] = [
            a for a in candidates if not seeded_keys.isdisjoint(grad_keys(a))
        ]
    return any(_seeded_grad(model, df, a, call_a, seeded) for a in passing)


def _pair_candidates(model: Model, df: Dataflow, evs_a: np.ndarray, exposed: dict[int, int]) -> list[int]:
    """The arrays of :func:`_may_pair_seeded` whose gradients decide: those segment A (events
    ``evs_a``) writes at memory that may pair with B's exposed inputs. Depends on A's content
    and the exposed memory codes only (cached by them)."""
    codes = _row_codes(model, df)
    rows, index = df.rows_of_events(evs_a)
    writes = df.is_write[rows]
    rows, index = rows[writes], index[writes]
    keys = codes.key(rows)
    hit = np.isin(keys, np.fromiter(exposed, dtype=np.int64, count=len(exposed)))
    kernels = model.kernel[evs_a[index]]
    paths = codes.path(rows)
    outputs = _forward_outputs(model, df)
    for kernel, path in set(zip(kernels.tolist(), paths.tolist())):
        if not exposed.keys().isdisjoint(outputs.get((kernel, path), ())):
            hit |= (kernels == kernel) & (paths == path)
    if not hit.any():
        return []
    return [int(a) for a in np.unique(model.acc_array[rows[np.isin(keys, keys[hit])]]).tolist()]


def _grad_keys_ever(model: Model, df: Dataflow) -> Callable[[int], frozenset[tuple[int, int, int]]]:
    """Array -> the memory keys of every ``.grad`` it ever has (:meth:`GradState.grad_arrays_ever`),
    cached per array: a superset of the keys :func:`_seeded_grad` can look up for it."""
    cache: dict[int, frozenset[tuple[int, int, int]]] = shared(model, "wt303_grad_keys_ever", lambda m: {})

    def keys(array_id: int) -> frozenset[tuple[int, int, int]]:
        found = cache.get(array_id)
        if found is None:
            found = cache[array_id] = frozenset(memory_key(model, g) for g in df.grad_arrays_ever(array_id))
        return found

    return keys


def _forward_outputs(model: Model, df: Dataflow) -> dict[tuple[int, int], set[int]]:
    """(kernel, argument path code) -> memory codes the forward launches of the kernel wrote
    there (the launches :func:`_index_originals` indexes)."""
    return shared(model, "wt303_forward_outputs", lambda m: _index_forward_outputs(m, df))


def _index_forward_outputs(model: Model, df: Dataflow) -> dict[tuple[int, int], set[int]]:
    codes = _row_codes(model, df)
    launches = np.nonzero((model.kind == K[S.LAUNCH]) & ~model.adjoint & (model.phase == S.FORWARD))[0]
    rows, position = df.rows_of_events(launches)
    writes = df.is_write[rows]
    rows, position = rows[writes], position[writes]
    kernels, paths, keys = model.kernel[launches[position]], codes.path(rows), codes.key(rows)
    out: dict[tuple[int, int], set[int]] = {}
    if paths.dtype == object:  # python ints (see _RowCodes): no combined code
        for kernel, path, key in zip(kernels.tolist(), paths.tolist(), keys.tolist()):
            out.setdefault((kernel, path), set()).add(key)
        return out
    _, first = np.unique(combine_codes([kernels, paths, keys]), return_index=True)
    for kernel, path, key in zip(kernels[first].tolist(), paths[first].tolist(), keys[first].tolist()):
        out.setdefault((kernel, path), set()).add(key)
    return out


def _seeded_grad(
    model: Model, df: Dataflow, array_id: int, call: BackwardCall, seeded: dict[tuple[int, int, int], int]
) -> bool:
    """Whether ``array_id``'s gradient at ``call`` is memory given a hand seed (the "seeded" of
    :func:`_chain_state`)."""
    grad = df.grad_array(array_id, call.begin_seq)
    return grad >= 0 and memory_key(model, grad) in seeded


def _boundary(model: Model, df: Dataflow, epoch_a: Epoch, exposed: dict[int, int]) -> list[tuple[int, int]]:
    """State handed from segment A to segment B: (array A wrote, array B read) pairs of the same
    memory, or of memory the original forward wrote where A's replay wrote fresh arrays.
    ``exposed``: B's exposed inputs (:func:`_exposed`).

    Segment A's launches are matched, in order, to earlier launches of the same kernel whose
    read arguments are the same memory once A's own outputs are mapped to the originals."""
    if not exposed:
        return []
    codes = _row_codes(model, df)
    originals, entry_of = _original_launches(model, df)
    start_a = int(model.seq[epoch_a.events[0]])
    mapping: dict[int, int] = {}
    changed: set[int] = set()  # keys k with mapping.get(k, k) != k
    out_a: dict[int, int] = {}
    provenance = df.provenance
    n_keys = codes.n_keys
    written = codes.written
    no_originals: tuple[list[int], list[int]] = ([], [])
    # A's read and write rows, grouped by event, as python lists (in row order)
    evs_a = np.asarray(epoch_a.events, dtype=np.int64)
    rows_a, index_a = df.rows_of_events(evs_a)
    reads_a = np.nonzero(df.is_read[rows_a])[0]
    writes_a = np.nonzero(df.is_write[rows_a])[0]
    read_cut = np.searchsorted(index_a[reads_a], np.arange(len(evs_a) + 1)).tolist()
    write_cut = np.searchsorted(index_a[writes_a], np.arange(len(evs_a) + 1)).tolist()
    read_keys = codes.key(rows_a[reads_a]).tolist()
    read_paths = codes.path(rows_a[reads_a]).tolist()
    write_rows = rows_a[writes_a]
    write_keys = codes.key(write_rows).tolist()
    write_paths = codes.path(write_rows).tolist()
    write_arrays = model.acc_array[write_rows].tolist()
    kernels_a = model.kernel[evs_a].tolist()
    for i, ev in enumerate(epoch_a.events):
        w0, w1 = write_cut[i], write_cut[i + 1]
        if w0 == w1:
            continue  # nothing to map or hand over
        leaves = provenance.get(ev)
        if leaves is None:
            continue
        r0, r1 = read_cut[i], read_cut[i + 1]
        entry = entry_of.get(ev)  # an original forward launch read what it read before any remapping
        if entry is None or (changed and not changed.isdisjoint(read_keys[r0:r1])):
            codes_read = [
                path * n_keys + mapping.get(key, key)
                for path, key in zip(read_paths[r0:r1], read_keys[r0:r1])
            ]
            codes_read.sort()
            entry = originals.get((kernels_a[i], tuple(codes_read)), no_originals)
        seqs, evs = entry
        j = bisect.bisect_left(seqs, start_a)
        outputs = None
        if j > 0:
            original = evs[j - 1]
            outputs = written.get(original)
            if outputs is None:
                outputs = written[original] = codes.outputs_of(original)
        for w in range(w0, w1):
            key = write_keys[w]
            if outputs:
                okey = outputs.get(write_paths[w])
                if okey is not None:
                    mapping[key] = okey
                    if okey != key:
                        changed.add(key)
                    else:
                        changed.discard(key)
            if leaves:
                out_a[mapping.get(key, key)] = write_arrays[w]
    return [(a_array, exposed[key]) for key, a_array in out_a.items() if key in exposed]


def _host_boundary(
    model: Model, df: Dataflow, epoch_a: Epoch, epoch_b: Epoch, call_b: BackwardCall
) -> list[tuple[int, int]]:
    """State handed from segment A to segment B through the host: B's input restored from a
    checkpoint (``wp.array(saved)``, linked by content to the ``numpy()`` read that saved it)
    pairs with the array A's replay wrote at the position of the original launch that
    produced the checkpointed values. A's launches are matched in order to the original
    launches after A's own checkpoint was read."""
    restored = df.host_restored
    if not restored:
        return []
    launch = K[S.LAUNCH]
    hits = _restored_reads(model, df, np.asarray(epoch_a.events, dtype=np.int64))
    if not hits:
        return []
    own_a = [ev for ev in epoch_a.events if model.kind[ev] == launch and not model.adjoint[ev]]
    # when A's checkpoint was read: the latest value read A's restored inputs came from
    start = -1
    epoch_set = set(epoch_a.events)
    for array_id in hits:
        write_ev, read_ev = restored[array_id]
        if write_ev not in epoch_set:
            start = max(start, read_ev)
    if start < 0:
        return []
    objective_b = df.objective_events(call_b)
    pairs: list[tuple[int, int]] = []
    positions: dict[int, int] = {}
    for ev in sorted(objective_b):
        for row in access_rows(model, ev):
            if not df.is_read[row]:
                continue
            b_array = int(model.acc_array[row])
            origin = restored.get(b_array)
            if origin is None or origin[1] <= start:
                continue
            for write_row in df.carried_writer_rows(origin[0]):
                original = int(df.acc_ev[write_row])
                if model.kind[original] != launch or model.adjoint[original] or model.recorded[original]:
                    continue
                if original not in positions:
                    positions[original] = _launch_position(model, start, original)
                k = positions[original]
                if k < 0 or k >= len(own_a) or model.kernel[own_a[k]] != model.kernel[original]:
                    continue
                path = (int(model.acc_arg_code[write_row]), int(model.acc_field_code[write_row]))
                for a_row in access_rows(model, own_a[k]):
                    if (
                        df.is_write[a_row]
                        and (int(model.acc_arg_code[a_row]), int(model.acc_field_code[a_row])) == path
                    ):
                        pair = (int(model.acc_array[a_row]), b_array)
                        if pair not in pairs:
                            pairs.append(pair)
    return pairs


def _restored_reads(model: Model, df: Dataflow, evs_a: np.ndarray) -> list[int]:
    """The arrays restored from a host copy (``df.host_restored``) that segment A (events
    ``evs_a``) reads, in id order; none when A runs no forward launch of its own. Computed once
    per segment content (:func:`_content_key`)."""
    cache: dict[bytes, list[int]] = shared(model, "wt303_restored_reads", lambda m: {})
    key = _content_key(model, evs_a)
    found = cache.get(key)
    if found is None:
        found = cache[key] = []
        own = (model.kind[evs_a] == K[S.LAUNCH]) & ~model.adjoint[evs_a]
        if own.any():
            restored = df.host_restored
            rows, _ = df.rows_of_events(evs_a)
            ids = model.acc_array[rows[df.is_read[rows]]]
            hits = np.unique(ids[np.isin(ids, np.fromiter(restored, dtype=np.int64, count=len(restored)))])
            found += hits.tolist()
    return found


def _launch_position(model: Model, start: int, original: int) -> int:
    """How many untaped forward launches ran after event ``start`` and before ``original``."""
    window = slice(start + 1, original)
    launches = (model.kind[window] == K[S.LAUNCH]) & ~model.adjoint[window] & ~model.recorded[window]
    return int(np.count_nonzero(launches))


def _original_launches(
    model: Model, df: Dataflow
) -> tuple[dict[tuple, tuple[list[int], list[int]]], dict[int, tuple[list[int], list[int]]]]:
    """(kernel, sorted read arguments as memory codes) -> (seqs, events) of the forward launches
    with them; and for each such launch, the entry of its own kernel and reads."""
    return shared(model, "wt303_originals", lambda m: _index_originals(m, df))


def _index_originals(
    model: Model, df: Dataflow
) -> tuple[dict[tuple, tuple[list[int], list[int]]], dict[int, tuple[list[int], list[int]]]]:
    codes = _row_codes(model, df)
    index: dict[tuple, tuple[list[int], list[int]]] = {}
    launches = np.nonzero((model.kind == K[S.LAUNCH]) & ~model.adjoint & (model.phase == S.FORWARD))[0]
    rows, position = df.rows_of_events(launches)
    read = df.is_read[rows]
    rows, position = rows[read], position[read]
    values = codes.read_codes(rows, codes.key(rows))
    if values.dtype == object:
        order: np.ndarray = np.asarray(
            sorted(range(len(values)), key=lambda i: (int(position[i]), values[i])), dtype=np.int64
        )
    else:
        order = np.lexsort((values, position))
    values = values[order].tolist()
    position = position[order]
    cuts = np.searchsorted(position, np.arange(len(launches) + 1), side="left").tolist()
    kernels = model.kernel[launches].tolist()
    seqs = model.seq[launches].tolist()
    entry_of: dict[int, tuple[list[int], list[int]]] = {}
    for i, ev in enumerate(launches.tolist()):
        signature = tuple(values[cuts[i] : cuts[i + 1]])
        entry = index.get((kernels[i], signature))
        if entry is None:
            entry = index[(kernels[i], signature)] = ([], [])
        entry[0].append(seqs[i])
        entry[1].append(ev)
        entry_of[ev] = entry
    return index, entry_of


def _seeded_memory(model: Model, df: Dataflow, call: BackwardCall) -> dict[tuple[int, int, int], int]:
    """Gradient memory given a hand seed before the call's adjoints -> seeding event."""
    out = {}
    for ev, grad_id, _owner, _from_grad in df.seeds(call):
        if grad_id >= 0:
            out[memory_key(model, grad_id)] = ev
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
    key = memory_key(model, grad_a)
    if key in seeded:
        return "seeded"
    grad_b = df.grad_array(b_array, call_b.begin_seq)
    if (
        grad_b >= 0
        and memory_key(model, grad_b) == key
        and df.fills(grad_a, call_b.index)
        and not df.zeroed_between(grad_a, call_b.end_seq, call_a.begin_seq)
    ):
        return "chained"
    return "missing"


RULE = Rule((WT303,), check)
