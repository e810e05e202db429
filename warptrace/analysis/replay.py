"""Graph capture seen as the program experienced it: captured work runs at each replay.

Inside ``wp.ScopedCapture()`` / ``capture_begin``..``capture_end`` Warp records launches,
copies and memsets into a graph without running them (``executed`` is false in the
trace); ``wp.capture_launch(graph)`` runs them later, once per call. Rules reason about
what memory held when, so before the model is built this module rewrites the event
order: the events of a capture window (same thread, between the begin and end of that
graph; tape events included, since a captured ``tape.backward()`` is a backward that
happens at each replay) are removed from where they were captured and inserted after
every ``capture_launch`` of that graph, marked executed, with fresh sequence numbers.
Each replay is its own recording: the tapes it uses get a fresh (virtual) tape id per
replay, so two replays never look like one tape recording the same launch twice. A
captured tape used outside the graph after a replay (a forward captured alone, then an
eager ``tape.backward()``, ``zero()``, or more launches recorded on it) is the tape of
its latest replay: the backward replays that forward's adjoints on the memory it left.
Events never replayed never happened. ``orig_seq`` keeps the recorded number, and
``replay`` the new seq of the ``capture_launch`` whose copy an event is (-1 elsewhere).

A trace without capture is returned unchanged.

:func:`expand_replays` (what the analysis uses) leaves the copied access rows unmade: the
model gathers its columns from the recorded rows (:class:`AccessCopies`), so the 6.7M copied
rows of a 1,200-replay trace are never built as an Arrow table first.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from warptrace.analysis.columns import AccessCopies, sorted_by
from warptrace.analysis.dataflow.base import expand_ranges, isin_ids
from warptrace.trace import schema as S
from warptrace.trace.reader import Trace


def expand_captures(trace: Trace) -> Trace:
    """The trace with its graph captures replayed where they ran (see the module's docstring)."""
    expanded, copies = expand_replays(trace)
    if copies is None:
        return expanded
    tables = dict(expanded.tables)
    tables["accesses"] = copies.table()
    return replace(expanded, tables=tables)


def _latest_tapes(tapes: np.ndarray, latest: np.ndarray) -> np.ndarray:
    """``tapes`` (recorded ids of events outside a replay) with each captured tape replaced by
    the id it has in its latest replay (``latest``: -1 for a tape not replayed yet)."""
    set_ = (tapes >= 0) & (tapes < len(latest))
    mapped = tapes.copy()
    mapped[set_] = np.where(latest[tapes[set_]] >= 0, latest[tapes[set_]], tapes[set_])
    return mapped


def expand_replays(trace: Trace) -> tuple[Trace, AccessCopies | None]:
    """:func:`expand_captures` with the access rows left as :class:`AccessCopies` (None, and the
    trace unchanged, without capture); the returned trace has no ``accesses`` table then."""
    events = trace.tables["events"]
    kinds = events.column("kind")
    if not pc.any(pc.equal(kinds, S.CAPTURE_BEGIN)).as_py():
        return trace, None
    events = events.combine_chunks()  # one chunk per column: the takes below are faster
    order = np.argsort(events.column("seq").to_numpy(), kind="stable")
    if np.any(order != np.arange(len(order))):
        events = events.take(order)
    seq = events.column("seq").to_numpy().astype(np.int64)
    kind = events.column("kind")

    def of_kind(name: str) -> np.ndarray:
        return pc.equal(kind, name).fill_null(False).to_numpy(zero_copy_only=False)

    thread = events.column("thread").fill_null(0).to_numpy()
    graph = events.column("ref_id").fill_null(-1).to_numpy()
    n = len(seq)

    # capture windows: graph id -> event indices captured into it (same thread only)
    in_window = np.zeros(n, dtype=bool)
    windows: dict[int, np.ndarray] = {}
    begins = np.nonzero(of_kind(S.CAPTURE_BEGIN))[0]
    ends = np.nonzero(of_kind(S.CAPTURE_END))[0]
    for begin in begins:
        after = ends[(ends > begin) & (thread[ends] == thread[begin])]
        stop = int(after[0]) if len(after) else n
        inside = np.arange(begin + 1, stop)
        inside = inside[thread[inside] == thread[begin]]
        gid = int(graph[stop]) if stop < n else int(graph[begin])
        windows[gid] = inside
        in_window[inside] = True

    tape = events.column("tape").fill_null(-1).to_numpy().astype(np.int64)
    next_tape = int(tape.max(initial=-1)) + 1
    take: list[np.ndarray] = []
    body_of: list[int] = []  # per piece of `take`: the graph whose body it is (-1: events between)
    is_body: list[bool] = []  # per piece of `take`: a replay's body (its events are copies)
    tapes: list[np.ndarray] = []
    kept = np.nonzero(~in_window)[0]
    launches = kept[of_kind(S.CAPTURE_LAUNCH)[kept]]
    # per graph: its body's tapes, which of them are set, and the rank of each set one among the
    # body's distinct tapes (each replay numbers them next_tape, next_tape + 1, ... in id order)
    renumber: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, int]] = {}
    for gid, body in windows.items():
        body_tapes = tape[body]
        used = body_tapes >= 0
        distinct, rank = np.unique(body_tapes[used], return_inverse=True)
        renumber[gid] = (body_tapes, used, rank.reshape(-1), len(distinct))
    empty_body = np.empty(0, dtype=np.int64)
    # a captured tape used outside the graph after a replay (an eager tape.backward(), zero(),
    # more launches recorded on it) is the tape of its latest replay: that replay's forward is
    # what the backward replays, on the memory it left. recorded tape id -> that replay's id
    latest = np.full(next_tape, -1, dtype=np.int64)
    cursor = 0
    for launch, cut in zip(launches.tolist(), (np.searchsorted(kept, launches) + 1).tolist()):
        upto = kept[cursor:cut]
        cursor = max(cursor, cut)
        take.append(upto)
        body_of.append(-1)
        is_body.append(False)
        tapes.append(_latest_tapes(tape[upto], latest))
        gid = int(graph[launch])
        body = windows.get(gid, empty_body)
        take.append(body)
        body_of.append(gid)
        is_body.append(True)
        if gid not in windows:
            tapes.append(tape[body])
            continue
        body_tapes, used, rank, n_used = renumber[gid]
        virtual = body_tapes.copy()
        virtual[used] = next_tape + rank
        latest[body_tapes[used]] = virtual[used]
        next_tape += n_used
        tapes.append(virtual)
    take.append(kept[cursor:])
    body_of.append(-1)
    is_body.append(False)
    tapes.append(_latest_tapes(tape[kept[cursor:]], latest))
    index = np.concatenate(take).astype(np.int64)
    # per taken event: copied by a replay, and then the new position of its capture_launch (the
    # event just before its piece), else -1; repeated per piece instead of made per piece
    lengths = np.array([len(piece) for piece in take], dtype=np.int64)
    body_mask = np.array(is_body, dtype=bool)
    is_replay = np.repeat(body_mask, lengths)
    launch_of = np.repeat(np.where(body_mask, np.cumsum(lengths) - lengths - 1, -1), lengths)

    new_seq = np.arange(len(index), dtype=np.int64)
    # parent links point at the most recent copy of the parent event
    parent = events.column("parent").fill_null(-1).to_numpy().astype(np.int64)
    new_parent = _latest_copies(seq[index], parent[index])

    executed = events.column("executed").fill_null(True).to_numpy(zero_copy_only=False)[index] | is_replay
    renewed = {  # the columns each copy gets anew: not taken
        "seq": pa.array(new_seq, type=pa.int64()),
        "parent": pa.array(new_parent, type=pa.int64()),
        "executed": pa.array(executed, type=pa.bool_()),
        "tape": pa.array(np.concatenate(tapes), type=pa.int32()),
    }
    pool = pa.system_memory_pool()  # see AccessCopies.table
    new_events = pc.take(events.drop_columns(list(renewed)), pa.array(index), memory_pool=pool)
    for at, name in sorted((events.schema.get_field_index(name), name) for name in renewed):
        new_events = new_events.add_column(at, name, renewed[name])
    new_events = new_events.append_column("orig_seq", pa.array(seq[index], type=pa.int64()))
    new_events = new_events.append_column("replay", pa.array(launch_of, type=pa.int64()))

    # accesses follow their event, once per copy
    accesses = trace.tables["accesses"].combine_chunks()
    # the strings as dictionary codes: the copies take ints, and the model reads the codes
    # (model._object_strings) instead of hashing every copied string again
    for name in ("arg", "field"):
        column = accesses.column(name)
        if pa.types.is_string(column.type):
            accesses = _set(accesses, name, pc.dictionary_encode(column))
    # the recorded rows in seq order (a few are written out of order): the table is put in order
    # once, so that the copies index it directly instead of each going through a permutation
    accesses, acc_seq = sorted_by(accesses, accesses.column("seq").to_numpy().astype(np.int64))
    # per recorded event, its rows of the seq-sorted accesses; each copy takes its event's
    event_starts = np.searchsorted(acc_seq, seq, side="left")
    event_stops = np.searchsorted(acc_seq, seq, side="right")
    starts, stops = event_starts[index], event_stops[index]
    counts = stops - starts
    rows, copy = _copied_rows(take, body_of, event_starts, event_stops, int(counts.sum()))
    copy_stop = np.cumsum(counts)
    copied = np.zeros(n, dtype=bool)
    copied[index] = True
    used, _ = expand_ranges(event_starts[copied], event_stops[copied])
    # the seq column is not copied: each copy gets its event's new seq
    at = accesses.schema.get_field_index("seq")
    copies = AccessCopies(
        accesses.remove_column(at),
        rows,
        copy,  # = new_seq[copy]: the new seqs are the positions
        at,
        copy_stop - counts,
        copy_stop,
        used,
    )

    # creation seqs of arrays and allocations: the first kept event at or after them
    first_position = np.full(n + 1, len(index), dtype=np.int64)
    first_position[index[::-1]] = new_seq[::-1]
    first_position = np.minimum.accumulate(first_position[::-1])[::-1]

    def remap(table: pa.Table) -> pa.Table:
        old = table.column("seq").fill_null(-1).to_numpy().astype(np.int64)
        where = np.searchsorted(seq, np.maximum(old, 0), side="left")
        mapped = np.where(old < 0, old, first_position[np.minimum(where, n)])
        return _set(table, "seq", pa.array(mapped, type=pa.int64()))

    tables = dict(trace.tables)
    tables["events"] = new_events
    del tables["accesses"]
    tables["arrays"] = remap(tables["arrays"])
    tables["allocs"] = remap(tables["allocs"])
    return replace(trace, tables=tables), copies


def _copied_rows(
    pieces: list[np.ndarray],
    body_of: list[int],
    event_starts: np.ndarray,
    event_stops: np.ndarray,
    total: int,
) -> tuple[np.ndarray, np.ndarray]:
    """``expand_ranges(event_starts[index], event_stops[index])`` of ``index``, the concatenated
    ``pieces`` of recorded events: each piece's rows, and for each row the position of its event in
    ``index``. The rows of a graph's body (``body_of``: its id, -1 for the events between replays)
    are expanded once and placed at each replay."""
    rows = np.empty(total, dtype=np.int64)
    copy = np.empty(total, dtype=np.int64)
    bodies: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    at = position = 0
    for piece, gid in zip(pieces, body_of):
        expanded = bodies.get(gid) if gid >= 0 else None
        if expanded is None:
            expanded = expand_ranges(event_starts[piece], event_stops[piece])
            if gid >= 0:
                bodies[gid] = expanded
        piece_rows, owner = expanded
        rows[at : at + len(piece_rows)] = piece_rows
        np.add(owner, position, out=copy[at : at + len(piece_rows)])
        at += len(piece_rows)
        position += len(piece)
    return rows, copy


def _latest_copies(origin_seq: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """For each position i with ``parent[i] >= 0``: the last position j <= i whose
    ``origin_seq[j]`` is that parent (-1 when there is none); ``parent[i]`` where it is negative."""
    n = len(origin_seq)
    out = np.where(parent >= 0, -1, parent).astype(np.int64)
    asks = np.nonzero(parent >= 0)[0]
    if n == 0 or len(asks) == 0:
        return out
    # the positions that can answer: copies of some parent (drone: 37,444 of 878,336)
    candidates = np.nonzero(isin_ids(origin_seq, parent[asks]))[0]
    if len(candidates) == 0:
        return out
    width = n + 1  # key = origin seq * width + position: sorted by seq, then position
    low = min(int(origin_seq[candidates].min()), int(parent[asks].min()))
    keys = (origin_seq[candidates] - low) * width + candidates
    order = np.argsort(keys, kind="stable")  # keys are distinct; a merge of the copies' ascending runs
    keys = keys[order]
    wanted = parent[asks] - low
    at = np.searchsorted(keys, wanted * width + asks, side="right") - 1
    hit = at >= 0
    hit[hit] = keys[at[hit]] // width == wanted[hit]
    out[asks[hit]] = candidates[order[at[hit]]]
    return out


def _set(table: pa.Table, name: str, column: pa.Array) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, column)
