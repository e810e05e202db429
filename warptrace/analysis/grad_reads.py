"""Where a program reads a gradient, and which backward calls the value it reads holds.

Pure (no Warp). A *gradient read* is an operation outside any backward that reads the
memory of an array's ``.grad``: ``numpy()``/``list()``, a launch or copy that reads it (an
optimizer step), an export to another framework (``wp.to_torch(p.grad)``). Memory shared
with another framework (the ``.grad`` of a ``from_torch`` leaf is the torch tensor's, a
gradient exported once before the loop) can be read by that framework at any time, out of
the recorder's sight: after each backward call that fills it, it counts as read (an
*implicit* read, the torch optimizer's ``step()``).

The value a read sees is the sum of the backward calls since *that array's* gradient was
last cleared: a zero fill (``zero_()``, ``tape.zero()``), a new ``.grad`` assigned, or the
array's own allocation (a fresh array's gradient starts at zero). A parameter rebuilt every
iteration (``p = wp.array(p.numpy() - lr * g, requires_grad=True)``) is a new array each
time: a read in iteration k sees iteration k's backward calls only, whatever the Python
name says. Arrays are told apart by allocation, never by name or address.

A *read point* is the program's reads between two backward calls (``w.grad.numpy()`` and
``b.grad.numpy()`` on consecutive lines are one read point): the gradients read there, each
with its own window of backward calls. Read points are numbered from 1 in time order;
``gradcheck --at N`` measures the N-th.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from warptrace.analysis.bisect import Leaf, Recording
from warptrace.analysis.dataflow import dataflow_of
from warptrace.analysis.model import K, Model
from warptrace.trace import schema as S


@dataclass
class ArrayReads:
    """The gradient reads and clears of one array (seqs, ascending)."""

    array_id: int
    reads: list[int]  # visible reads
    implicit: list[int]  # implicit reads (end of each backward filling memory shared with another framework)
    clears: list[int]  # zero fills, new .grad assigned, the allocation itself
    shared_since: int | None  # seq from which the gradient memory is shared with another framework

    def all_reads(self) -> list[tuple[int, bool]]:
        """(seq, implicit) of every read, in time order."""
        return sorted([(seq, False) for seq in self.reads] + [(seq, True) for seq in self.implicit])

    def window_start(self, seq: int) -> int:
        """Seq of the last clear before ``seq`` (-1: none seen)."""
        i = bisect.bisect_left(self.clears, seq)
        return self.clears[i - 1] if i > 0 else -1


STALE_ACCUMULATED = "accumulated"
STALE_REPLAYED = "replayed"
STALE_OLD_FORWARD = "old-forward"


@dataclass
class ReadPoint:
    """The reads between two backward calls, and the backward calls each value read holds."""

    number: int  # 1-based, in time order
    seq: int  # the first read of the point
    windows: dict[int, list[Recording]]  # array_id -> the backward calls its value holds
    # why the value read here also holds what an earlier read saw ("" when it does not):
    # STALE_ACCUMULATED (backward calls from before the array's previous read, never cleared) or
    # STALE_REPLAYED (a tape never reset replays forwards recorded before that read) or
    # STALE_OLD_FORWARD (its backward calls replay only forwards recorded before that read:
    # nothing recomputed the objective since, whatever changed the parameters in between)
    stale: str
    implicit: bool  # every read of the point is implicit (memory shared with another framework)
    start: int  # seq of the earliest clear among the windows (-1: before the run)
    starts: dict[int, int] = field(default_factory=dict)  # array_id -> seq of its last clear

    @property
    def window(self) -> list[Recording]:
        """Every backward call some value read here holds, in call order."""
        seen: dict[int, Recording] = {}
        for recordings in self.windows.values():
            for recording in recordings:
                seen.setdefault(recording.backward, recording)
        return [seen[number] for number in sorted(seen)]


def grad_owners(model: Model, array_ids: Iterable[int]) -> dict[int, int]:
    """Every array object that is (a view of) the gradient of one of ``array_ids`` at some point,
    mapped to that array."""
    wanted = set(array_ids)
    owner: dict[int, int] = {a: info.grad_of for a, info in model.arrays.items() if info.grad_of in wanted}
    for ref, of in dataflow_of(model).grad_owner.items():
        if of in wanted:
            owner.setdefault(ref, of)
    for a, info in model.arrays.items():
        if info.base_id in owner and a not in owner:
            owner[a] = owner[info.base_id]
    return owner


def array_reads(model: Model, array_ids: list[int], leaf_of: dict[int, set[int]]) -> dict[int, ArrayReads]:
    """Reads and clears of the gradient of each of ``array_ids`` (one pass over the trace for all);
    ``leaf_of``: backward seq -> the leaves of the recording it replays (a backward fills the
    gradient of its leaves)."""
    owner = grad_owners(model, array_ids)
    reads: dict[int, set[int]] = {a: set() for a in array_ids}
    clears: dict[int, set[int]] = {a: set() for a in array_ids}
    shared: dict[int, int] = {}
    ids = np.fromiter(owner, dtype=np.int64, count=len(owner))
    handed = _handovers(model)
    value_reads = model.events_of_kind(S.VALUE_READ)
    for ev in value_reads[np.isin(model.array_id[value_reads], ids)].tolist():
        if ev not in handed:
            reads[owner[int(model.array_id[ev])]].add(int(model.seq[ev]))
    rows = np.nonzero(np.isin(model.acc_array, ids))[0]
    evs = model.acc_ev[rows]
    keep = (evs >= 0) & (model.phase[np.maximum(evs, 0)] == S.FORWARD) & ~model.adjoint[np.maximum(evs, 0)]
    memset, bridge = K[S.MEMSET], K[S.BRIDGE]
    for row, ev in zip(rows[keep].tolist(), evs[keep].tolist()):
        array_id = owner[int(model.acc_array[row])]
        seq = int(model.seq[ev])
        role = int(model.acc_role[row])
        if model.kind[ev] == bridge:
            shared[array_id] = min(shared.get(array_id, seq), seq)
        if role in (S.ROLE_READ, S.ROLE_READWRITE) and ev not in handed:
            reads[array_id].add(seq)
        elif role == S.ROLE_WRITE and model.kind[ev] == memset:
            value = float(model.value[ev])
            if np.isnan(value) or value == 0.0:
                clears[array_id].add(seq)
    # memory shared through another array object (a torch tensor wrapped twice)
    alloc_owner: dict[int, set[int]] = {}
    for grad, array_id in owner.items():
        info = model.arrays.get(grad)
        if info is not None and info.alloc_id >= 0:
            alloc_owner.setdefault(info.alloc_id, set()).add(array_id)
    for ev in model.events_of_kind(S.BRIDGE).tolist():
        seq = int(model.seq[ev])
        for r in model.accesses_of(ev):
            for array_id in alloc_owner.get(int(model.acc_alloc[r]), ()):
                shared[array_id] = min(shared.get(array_id, seq), seq)
    # a fresh array (or a fresh .grad) starts at zero: its registration is a clear
    for array_id in array_ids:
        info = model.arrays.get(array_id)
        if info is not None:
            clears[array_id].add(int(info.seq))
    for grad, array_id in owner.items():
        info = model.arrays.get(grad)
        if info is not None and info.grad_of == array_id:
            clears[array_id].add(int(info.seq))
    set_grads = model.events_of_kind(S.SET_GRAD)
    for ev in set_grads.tolist():
        array_id = int(model.array_id[ev])
        if array_id in clears:
            clears[array_id].add(int(model.seq[ev]))
    ends = model.seq[model.events_of_kind(S.BACKWARD_END)]
    out = {}
    for array_id in array_ids:
        implicit: set[int] = set()
        since = shared.get(array_id)
        if since is not None:
            for backward_seq, leaves in leaf_of.items():
                if backward_seq > since and array_id in leaves:
                    i = int(np.searchsorted(ends, backward_seq))
                    if i < len(ends):
                        implicit.add(int(ends[i]))
        out[array_id] = ArrayReads(
            array_id,
            sorted(reads[array_id]),
            sorted(implicit - reads[array_id]),
            sorted(clears[array_id]),
            since,
        )
    return out


def _handovers(model: Model) -> set[int]:
    """Events that hand a gradient over to another gradient instead of reading it: a copy or
    launch outside any backward that writes a gradient buffer (``q_end.grad.assign(q.grad)``
    between checkpoint segments), and a ``numpy()`` whose bytes are written back into a
    gradient buffer (the same hand-over through the host). What they read becomes the seed of
    another backward; the program's own read of the result comes later."""
    cached = model.derived.get("grad_handovers")
    if cached is not None:
        return cached
    grads = set(model.grad_array_ids.tolist())
    rows = np.nonzero(
        np.isin(model.acc_role, (S.ROLE_WRITE, S.ROLE_READWRITE))
        & (((model.acc_flags & S.FLAG_GRAD) != 0) | np.isin(model.acc_array, list(grads)))
    )[0]
    evs = model.acc_ev[rows]
    evs = evs[evs >= 0]
    forward = evs[(model.phase[evs] == S.FORWARD) & ~model.adjoint[evs] & (model.parent[evs] < 0)]
    out = set(forward[np.isin(model.kind[forward], (K[S.COPY], K[S.LAUNCH]))].tolist())
    links = dataflow_of(model).host_links
    for write_ev, read_ev in links.items():
        if write_ev in out or any(int(model.acc_array[r]) in grads for r in model.accesses_of(write_ev)):
            out.add(read_ev)
    model.derived["grad_handovers"] = out
    return out


def read_points(
    executed: list[Recording],
    reads_of: Iterable[ArrayReads],
    first_seq: dict[int, int] | None = None,
    last_seq: dict[int, int] | None = None,
) -> list[ReadPoint]:
    """The read points of the run, in time order: reads grouped by the backward calls before
    them; a group is a read point when some value read there holds a backward call that no
    earlier read of that array saw. ``first_seq``: backward seq -> seq of the first operation
    its recording replays (a tape never reset replays forwards older than the last read);
    ``last_seq``: backward seq -> seq of its recording's last operation."""
    backward_seqs = [r.backward_seq for r in executed]
    groups: dict[int, list[tuple[int, bool, ArrayReads]]] = {}
    for reads in reads_of:
        for seq, implicit in reads.all_reads():
            groups.setdefault(bisect.bisect_left(backward_seqs, seq), []).append((seq, implicit, reads))
    points: list[ReadPoint] = []
    for after in sorted(groups):
        if after == 0:
            continue  # before any backward
        windows: dict[int, list[Recording]] = {}
        starts: dict[int, int] = {}
        first_read: dict[int, int] = {}
        implicit_all = True
        stale = ""
        for seq, implicit, reads in sorted(groups[after], key=lambda item: item[0]):
            if reads.array_id in windows:
                implicit_all &= implicit
                continue
            cleared = reads.window_start(seq)
            # every backward call since the clear: one whose tape does not read the array adds
            # nothing to its gradient, but its loss may depend on the array through state an
            # earlier tape wrote (a tape per frame), so the objective sums all their losses
            window = [r for r in executed[:after] if cleared < r.backward_seq < seq]
            if not window:
                continue
            previous = max((s for s, _ in reads.all_reads() if s < seq), default=-1)
            fresh = [r for r in window if r.backward_seq > previous]
            if not fresh:
                continue
            if previous >= 0 and len(fresh) < len(window):
                stale = stale or STALE_ACCUMULATED
            elif (
                previous >= 0
                and last_seq
                and all(last_seq.get(r.backward_seq, seq) < previous for r in fresh)
            ):
                stale = stale or STALE_OLD_FORWARD
            elif (
                previous >= 0
                and first_seq
                and any(first_seq.get(r.backward_seq, seq) < previous for r in fresh)
            ):
                stale = stale or STALE_REPLAYED
            windows[reads.array_id] = window
            starts[reads.array_id] = cleared
            first_read[reads.array_id] = seq
            implicit_all &= implicit
        if windows:
            points.append(
                ReadPoint(
                    number=len(points) + 1,
                    seq=min(first_read.values()),
                    windows=windows,
                    stale=stale,
                    implicit=implicit_all,
                    start=min(starts.values()),
                    starts=starts,
                )
            )
    return points


def unread_points(executed: list[Recording], leaves_of: dict[int, list[Leaf]]) -> list[ReadPoint]:
    """When the program never reads a gradient: each backward call on its own, over its leaves."""
    points: list[ReadPoint] = []
    for recording in executed:
        leaves = leaves_of.get(recording.backward_seq, [])
        if not leaves:
            continue
        points.append(
            ReadPoint(
                number=len(points) + 1,
                seq=recording.backward_seq + 1,
                windows={leaf.array_id: [recording] for leaf in leaves},
                stale="",
                implicit=False,
                start=recording.backward_seq - 1,
            )
        )
    return points
