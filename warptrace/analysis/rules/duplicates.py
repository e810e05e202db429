"""Launches that recompute what an earlier launch on the same tape wrote, over the same
memory: the mechanism WT201 (duplicate-launch) and WT202 (retain-grad-multiwrite) share."""

from __future__ import annotations

import numpy as np

from warptrace.analysis.dataflow import Dataflow, combine_codes, dataflow_of
from warptrace.analysis.dataflow.base import unique_inverse
from warptrace.analysis.model import K, Model
from warptrace.analysis.rules.common import shared
from warptrace.trace import schema as S


def duplicate_pairs(model: Model) -> list[tuple[int, int, list[int]]]:
    """(first, second, shared written arrays) per duplicated launch pair; computed once per model."""
    return shared(model, "duplicate_pairs", _duplicate_pairs)


def _launch_signatures(model: Model, df: Dataflow, evs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The launches among ``evs`` that can be duplicates (they write, and no write accumulates or
    also reads: relaunching those changes memory), and for each an id of what makes two launches
    the same computation over the same memory: the kernel, the launch dims and the multiset of
    accesses (argument, field, role, view geometry). Equal ids <=> equal signatures.

    Computed once per recorded event: the copies of one (graph replays, :attr:`Model.orig_seq`)
    have its kernel, dims and access rows, so its answer (drone: 217,200 launches on tapes, copies
    of 181)."""
    recorded, inverse = unique_inverse(model.orig_seq[evs])
    copy_of = np.empty(len(recorded), dtype=np.int64)
    copy_of[inverse] = evs  # one copy of each recorded event (any: they are the same)
    keep, signatures = _recorded_signatures(model, df, copy_of)
    signature_of = np.full(len(recorded), -1, dtype=np.int64)
    signature_of[keep] = signatures
    signatures = signature_of[inverse]
    kept = signatures >= 0
    return evs[kept], signatures[kept]


def _recorded_signatures(model: Model, df: Dataflow, evs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_launch_signatures` of launches that copy distinct recorded events: which of ``evs``
    can be duplicates (a mask), and their signature ids (non-negative)."""
    rows, owner = df.rows_of_events(evs)
    writes = df.is_write[rows]
    changing = writes & (df.is_accumulate[rows] | df.is_read[rows])
    keep = (np.bincount(owner[changing], minlength=len(evs)) == 0) & (
        np.bincount(owner[writes], minlength=len(evs)) > 0
    )
    evs, counts = evs[keep], (model.acc_stop[evs] - model.acc_start[evs])[keep]
    if not len(evs):
        return keep, np.zeros(0, dtype=np.int64)
    rows = rows[keep[owner]]
    offsets = np.cumsum(counts) - counts

    # view geometry: (alloc, offset, shape, strides), or the array id when the array is unknown
    array_ids, inverse = unique_inverse(model.acc_array[rows])
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
    parts = unique_inverse(parts)[1]  # dense: few distinct accesses
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
    return keep, signatures


def _duplicate_pairs(model: Model) -> list[tuple[int, int, list[int]]]:
    """(first launch, duplicate launch, written access rows of the duplicate) on one tape epoch."""
    df = dataflow_of(model)
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
