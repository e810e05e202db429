"""The reductions a program applies to the values it seeds by hand (what WT304 compares the
seed with).

A hand seed ``terms.grad.fill_(v)`` backpropagates ``v * sum(terms)``. The program reports
its objective elsewhere, by reducing the same values, and a reduction is visible in the
trace in three ways:

- a kernel launch (taped or not, at any time of the run) that reads them and writes a
  smaller array: the kernel-source model tells the weight each element gets
  (:func:`warptrace.kernel_source.reduction.reduction_weights`: ``/ float(N)`` with a
  module constant or a shape is 1/N, a plain atomic sum 1, a scalar argument unknown);
- a native utility: ``array_sum`` (weight 1), others with unknown weights;
- a host read (``.numpy()``, ``.list()``) on a line that takes their mean (weight 1/N) or
  their sum (weight 1). What the host computes on later lines from values it read is
  invisible: a read alone is no reduction.

"The same values" are the seeded array's memory, or arrays allocated at the same call site
(a loop that rebuilds its arrays each iteration), holding what the same kernel computed: the
objective a program prints after the parameter update is the same reduction of the same
quantity, recomputed. (An allocation helper shared by unrelated code makes one call site for
unrelated arrays; the producing kernel tells them apart.) A kernel reduction counts only when
its output is read afterwards (reported, or used).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from warptrace.analysis.dataflow import Dataflow
from warptrace.analysis.model import K, Model
from warptrace.analysis.rules.common import access_rows, arg_path, shared
from warptrace.kernel_source.reduction import reduction_weights
from warptrace.trace import schema as S

__all__ = ["Objective", "objectives_of", "producer"]

# A host line that takes the mean of what it reads: `np.mean(y.numpy())`, `y.numpy().mean()`,
# `np.average(...)`, `y.numpy().sum() / n`; or its sum: `np.sum(y.numpy())`, `y.numpy().sum()`.
MEAN_LINE = re.compile(r"\b(?:nan)?(?:mean|average)\s*\(|\bsum\s*\([^#]*\)\s*/")
_SUM_LINE = re.compile(r"\b(?:nan)?sum\s*\(")
# Native utilities whose weights are known: array_sum adds every element once.
_NATIVE_WEIGHTS = {"array_sum": 1.0}


@dataclass(frozen=True)
class Objective:
    """One reduction of the seeded values."""

    ev: int  # the launch, native call or host read
    weight: float | None  # the weight of each element; None: not known
    how: str  # "`mean_loss`", "np.mean on the host", "array_sum"
    size: int  # elements of the array it reduced
    array_id: int  # the array it reduced


def producer(model: Model, df: Dataflow, array_id: int, seq: int) -> str | None:
    """The kernel whose launch last wrote the memory of ``array_id`` before ``seq`` (its key),
    None when the last writer is no launch (or there is none)."""
    writers = df.writers_of_memory(int(array_id), int(seq))
    if not writers:
        return None
    ev = int(df.acc_ev[writers[0]])
    if model.kind[ev] != K[S.LAUNCH]:
        return None
    kernel = model.kernels.get(int(model.kernel[ev]))
    return kernel.key if kernel is not None else None


def objectives_of(model: Model, df: Dataflow, owner: int, kernel: str | None) -> list[Objective]:
    """Every reduction, anywhere in the run, of the values of array ``owner`` (its memory, or
    arrays allocated where it was) as kernel ``kernel`` computed them (any values when None),
    in time order."""
    found = _all_objectives(model, df, owner)
    if kernel is None:
        return found
    return [o for o in found if producer(model, df, o.array_id, int(model.seq[o.ev])) == kernel]


def _all_objectives(model: Model, df: Dataflow, owner: int) -> list[Objective]:
    allocs = _same_values(model, owner)
    if not allocs:
        return []
    cache: dict[frozenset[int], list[Objective]] = shared(model, "seed_objectives", lambda _: {})
    key = frozenset(allocs)
    if key not in cache:  # the arrays of a loop that rebuilds them share one answer
        cache[key] = _objectives(model, df, allocs)
    return cache[key]


def _objectives(model: Model, df: Dataflow, allocs: set[int]) -> list[Objective]:
    rows = np.nonzero(np.isin(model.acc_alloc, np.fromiter(allocs, dtype=np.int64)))[0]
    rows = rows[(df.is_read[rows]) & ((model.acc_flags[rows] & S.FLAG_GRAD) == 0)]
    evs = df.acc_ev[rows]
    keep = ~model.adjoint[evs] & (model.phase[evs] == S.FORWARD)
    found = []
    seen: set[tuple[int, str]] = set()
    for row, ev in zip(rows[keep].tolist(), evs[keep].tolist()):
        key = (ev, str(model.acc_arg[row]))
        if key in seen:
            continue
        seen.add(key)
        objective = _objective(model, df, ev, row)
        if objective is not None:
            found.append(objective)
    return found


def _same_values(model: Model, owner: int) -> set[int]:
    """The allocation of ``owner`` and those of arrays allocated at the same call site."""
    info = model.arrays.get(int(owner))
    if info is None or info.alloc_id < 0:
        return set()
    allocs = {info.alloc_id}
    site = model.allocation_site(owner)
    if site >= 0:
        allocs |= shared(model, "allocs_by_site", _allocs_by_site).get(site, set())
    return allocs


def _allocs_by_site(model: Model) -> dict[int, set[int]]:
    table: dict[int, set[int]] = {}
    for info in model.arrays.values():
        if info.grad_of >= 0 or info.alloc_id < 0 or info.kind != S.ARRAY_OWNED:
            continue
        site = model.allocation_site(info.array_id)
        if site >= 0:
            table.setdefault(site, set()).add(info.alloc_id)
    return table


def _objective(model: Model, df: Dataflow, ev: int, row: int) -> Objective | None:
    read_id = int(model.acc_array[row])
    read = model.arrays.get(read_id)
    size = read.size if read is not None else 0
    kind = int(model.kind[ev])
    if kind == K[S.VALUE_READ]:
        text = model.event_location(ev).text
        if MEAN_LINE.search(text) and size > 0:
            return Objective(ev, 1.0 / size, "a mean on the host", size, read_id)
        if _SUM_LINE.search(text):
            return Objective(ev, 1.0, "a sum on the host", size, read_id)
        return None
    if kind == K[S.NATIVE]:
        facts = model.detail(ev)
        name = str(facts.get("func", "")) if isinstance(facts, dict) else ""
        if name in _NATIVE_WEIGHTS:  # its result may be returned to the host rather than written
            return Objective(ev, _NATIVE_WEIGHTS[name], f"`{name}`", size, read_id)
        if _writes_smaller(model, ev, size):
            return Objective(ev, None, f"`{name or 'a native utility'}`", size, read_id)
        return None
    if kind != K[S.LAUNCH]:
        return None
    kernel = model.kernels.get(int(model.kernel[ev]))
    if kernel is None:
        return None
    shapes = {}
    written: dict[str, int] = {}
    for r in access_rows(model, ev):
        path = arg_path(str(model.acc_arg[r]), str(model.acc_field[r]))
        info = model.arrays.get(int(model.acc_array[r]))
        if info is not None:
            shapes[path] = info.shape
            if df.is_write[r] and not model.acc_flags[r] & S.FLAG_GRAD:
                written[path] = int(model.acc_array[r])
    read_path = arg_path(str(model.acc_arg[row]), str(model.acc_field[row]))
    for reduction in reduction_weights(kernel.source_model, read_path, shapes):
        out = written.get(reduction.output, -1)
        out_info = model.arrays.get(out)
        if out_info is None or out_info.size >= size or not _used_after(model, df, out, ev):
            continue
        return Objective(ev, reduction.weight, f"`{kernel.key}`", size, read_id)
    return None


def _writes_smaller(model: Model, ev: int, size: int) -> bool:
    for r in access_rows(model, ev):
        if model.acc_role[r] & S.ROLE_WRITE and not model.acc_flags[r] & S.FLAG_GRAD:
            written = model.arrays.get(int(model.acc_array[r]))
            if written is not None and written.size < size:
                return True
    return False


def _used_after(model: Model, df: Dataflow, array_id: int, ev: int) -> bool:
    """Whether anything reads ``array_id``'s memory after event ``ev`` (a reported objective)."""
    return any(not model.adjoint[df.acc_ev[row]] for row in df.iter_reads(array_id, int(model.seq[ev])))
