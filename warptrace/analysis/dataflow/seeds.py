"""Seeds and fills of gradient buffers: which backward calls fill which gradient memory, the
seeds a backward starts from (``loss=``, ``grads=``, a hand-filled ``.grad``), the objective
slice of a backward, and when a gradient buffer was zeroed."""

from __future__ import annotations

import bisect
from functools import cached_property

import numpy as np

from warptrace.analysis.dataflow.base import combine_codes, expand_ranges, unique_inverse
from warptrace.analysis.dataflow.fill_groups import (
    FillGroups,
    grouped_fills_in_call_order,
    grouped_fills_sorted,
)
from warptrace.analysis.dataflow.grad_state import GradState
from warptrace.analysis.dataflow.tapes import BackwardCall
from warptrace.trace import schema as S


class Seeds(GradState):
    """Seeds and fills of gradient buffers: which backward calls fill which gradient memory, the"""

    _slice_mark = -1  # the last mark :meth:`_slices` put in ``stamp`` (see :attr:`_slice_marks`)

    # ------------------------------------------------------------ what backward calls fill
    @cached_property
    def fill_rows(self) -> np.ndarray:
        """Access rows by which a backward call adds gradient into a ``.grad`` buffer: adjoint
        accumulations, and read-modify-write stores such as the copy adjoint's ``a = a + b``
        (a launch inside the backward that reads the gradient memory it overwrites)."""
        m = self.model
        K = self._K
        backward_launch = (m.phase == S.BACKWARD) & (m.kind == K[S.LAUNCH])  # per event
        # worked out where a graph replay does not copy an earlier one: an event's own rows decide
        decided = m.decided_rows
        candidates = self.grad_row_mask[decided] & self.is_write[decided] & (m.acc_alloc[decided] >= 0)
        candidates &= backward_launch[self.acc_ev[decided]]
        accumulating = candidates & self.is_accumulate[decided]
        # plain stores: accumulating when a read row of the same launch overlaps them
        plain = np.nonzero(candidates & ~self.is_accumulate[decided])[0]  # positions in `decided`
        rows = plain if isinstance(decided, slice) else decided[plain]
        own = ~m.adjoint[self.acc_ev[rows]]
        rows, plain = rows[own], plain[own]
        if len(rows):
            evs = self.acc_ev[rows]
            others, owner = expand_ranges(m.acc_start[evs], m.acc_stop[evs])
            mine = rows[owner]
            (other_lo, other_hi), (mine_lo, mine_hi) = self.hulls(others), self.hulls(mine)
            hit = (
                self.is_read[others]
                & (m.acc_alloc[others] == m.acc_alloc[mine])
                & (other_lo < mine_hi)
                & (mine_lo < other_hi)
            )
            accumulating[plain[owner[hit]]] = True
        if isinstance(decided, slice):
            return np.nonzero(accumulating)[0]
        mask = np.zeros(len(m.acc_seq), dtype=bool)
        mask[decided[accumulating]] = True
        m.fill_row_copies(mask)
        return np.nonzero(mask)[0]

    @cached_property
    def fill_groups(self) -> FillGroups:
        """Gradient memory filled by backward calls: the fill rows run by a backward call, grouped by
        gradient memory (alloc, lo, hi) in order of first fill; per memory, the backward call
        indexes whose adjoint launches accumulate into it (the loss seed and consumption are not
        fills), in row order with repeats of the same call in a row dropped."""
        m = self.model
        rows = self.fill_rows
        memory = self._memory_codes(rows)  # one dense code per memory
        calls = self.ev_backward[self.acc_ev[rows]]
        keep = calls >= 0
        if not keep.all():  # (drone: every one of its 1.33M fill rows is a call's, no copies)
            rows, calls, memory = rows[keep], calls[keep], memory[keep]
        # the adjoint flag gathered in row order (rows ascend: near-sequential)
        adjoint = m.adjoint[self.acc_ev[rows]]
        grouped = grouped_fills_in_call_order(rows, memory, calls, adjoint)
        if grouped is None:
            grouped = grouped_fills_sorted(rows, memory, calls, adjoint)
        first_rows, adjoint_row, cuts, group_calls = grouped
        lo, hi = self.hulls(first_rows)
        return FillGroups(
            alloc=m.acc_alloc[first_rows],
            lo=lo,
            hi=hi,
            first_row=first_rows,
            adjoint_row=adjoint_row,
            cuts=cuts,
            calls=group_calls,
        )

    def _memory_codes(self, rows: np.ndarray) -> np.ndarray:
        """Per access row of ``rows`` (ascending): a dense code of its memory (allocation, byte
        hull), equal codes <=> equal memory, ``unique_inverse`` of their combined codes. A graph
        replay that copies a template (``Model.row_copies``) and has the template's rows among
        ``rows``, moved, takes their codes (the same rows: the same memory); the codes are worked
        out for the other rows, which hold every distinct memory."""
        m = self.model
        copied = np.zeros(len(rows), dtype=bool)
        moves: list[tuple[int, int, int]] = []
        if m.row_copies:
            start, stop, template = (np.array(column, dtype=np.int64) for column in zip(*m.row_copies))
            first, end, template_first = (np.searchsorted(rows, x) for x in (start, stop, template))
            for a, b, ta, shift in zip(
                first.tolist(), end.tolist(), template_first.tolist(), (start - template).tolist()
            ):
                if b > a and np.array_equal(rows[a:b] - shift, rows[ta : ta + b - a]):
                    copied[a:b] = True
                    moves.append((a, b, ta))
        own = np.nonzero(~copied)[0]
        codes = np.empty(len(rows), dtype=np.int64)
        mine = rows[own]
        codes[own] = unique_inverse(combine_codes([m.acc_alloc[mine], *self.hulls(mine)]))[1]
        for a, b, ta in moves:
            codes[a:b] = codes[ta : ta + b - a]
        return codes

    def fills(self, array_id: int, call_index: int) -> bool:
        """Whether backward call ``call_index`` accumulated into ``array_id``."""
        calls = self._fill_info(array_id)[0]
        i = bisect.bisect_left(calls, call_index)
        return i < len(calls) and calls[i] == call_index

    def fills_before(self, array_id: int, seq: int) -> list[int]:
        """Indexes of the calls filling ``array_id`` that ended before ``seq`` (in time order)."""
        calls, ends, _zeros = self._fill_info(array_id)
        return calls[: bisect.bisect_left(ends, seq)]

    def zeroed_between(self, grad_id: int, after_seq: int, before_seq: int) -> bool:
        """Whether gradient buffer ``grad_id`` was cleared or overwritten in (after_seq, before_seq):
        a memset, copy or plain store outside any backward, or ``tape.zero()``/``tape.reset()`` of a
        tape whose backward had accumulated into it (``Tape.zero`` zeroes the gradients its
        backward calls looked up). A store that transforms the values in place is not a clear
        (:attr:`clearing_store`)."""
        writes = self.writes_between(grad_id, after_seq, before_seq)
        if len(writes) and bool(np.any(self.clearing_store[writes])):
            return True
        zeros = self._fill_info(grad_id)[2]
        i = bisect.bisect_right(zeros, after_seq)
        return i < len(zeros) and zeros[i] < before_seq

    @cached_property
    def clearing_store(self) -> np.ndarray:
        """Per access row: a plain store outside any backward that replaces what the memory held
        (what clears a gradient buffer). A store by an event that also reads the memory it
        stores (``g.grad -= P @ g.grad``, a clip or scale in place) transforms the values
        instead, and is not one."""
        m = self.model
        # rows of a graph replay copying an earlier one: the template's answer (an event's own rows
        # decide), set at the end
        decided = m.decided_rows
        store = self.is_store[decided] & (m.phase[self.acc_ev[decided]] == S.FORWARD)
        store &= ~self.is_read[decided]  # a read-and-store row (x[i] = f(x[i])) rereads what it stores
        positions = np.nonzero(store)[0]  # in `decided`
        rows = positions if isinstance(decided, slice) else decided[positions]
        if len(rows):
            # pairs (store row, read row of the same event and allocation), then the exact overlap
            big = int(m.acc_alloc.max(initial=0)) + 2
            reads = np.nonzero(self.is_read[decided] & (m.acc_alloc[decided] >= 0))[0]
            reads = reads if isinstance(decided, slice) else decided[reads]
            read_keys = self.acc_ev[reads] * big + m.acc_alloc[reads]
            order = np.argsort(read_keys, kind="stable")
            read_keys, reads = read_keys[order], reads[order]
            keys = self.acc_ev[rows] * big + m.acc_alloc[rows]
            first = np.searchsorted(read_keys, keys, side="left")
            counts = np.searchsorted(read_keys, keys, side="right") - first
            has = counts > 0
            rows, first, counts, positions = rows[has], first[has], counts[has], positions[has]
            owner = np.repeat(np.arange(len(rows)), counts)
            offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
            pair_reads = reads[np.repeat(first, counts) + offsets]
            pair_rows = rows[owner]
            (read_lo, read_hi), (row_lo, row_hi) = self.hulls(pair_reads), self.hulls(pair_rows)
            overlap = (read_lo < row_hi) & (row_lo < read_hi)
            store[positions[np.bincount(owner[overlap], minlength=len(rows)) > 0]] = False
        if isinstance(decided, slice):
            return store
        mask = np.zeros(len(m.acc_seq), dtype=bool)
        mask[decided[store]] = True
        m.fill_row_copies(mask)
        return mask

    def _fill_info(self, array_id: int) -> tuple[list[int], list[int], list[int]]:
        """(filling call indexes, their end seqs, seqs of tape zero/reset events that clear it)."""
        info = self.model.arrays.get(int(array_id))
        if info is None or info.alloc_id < 0:
            return [], [], []
        key = (info.alloc_id, *info.hull)
        cached = self._fill_cache.get(key)
        if cached is not None:
            return cached
        lo, hi = info.hull
        parts = [
            calls
            for key_lo, key_hi, calls in self._fills_by_alloc.get(info.alloc_id, ())
            if key_lo < hi and lo < key_hi
        ]
        found = np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)
        # the rest depends on the filling calls only, which most gradient memories share (drone: 175
        # memories, each filled by the same 1,200 calls): one result, its lists made once, for all
        shared = self._fill_by_calls.get(found.tobytes())
        if shared is None:
            shared = self._fill_by_calls[found.tobytes()] = self._fill_lists(found)
        self._fill_cache[key] = shared
        return shared

    def _fill_lists(self, found: np.ndarray) -> tuple[list[int], list[int], list[int]]:
        """:meth:`_fill_info` of a memory that the calls ``found`` (ascending) fill."""
        call_tape, call_begin, call_end = self._call_columns
        # the first filling call of each tape (calls in index order), and the zero/reset events of
        # that tape after it
        tapes, first = np.unique(call_tape[found], return_index=True)
        zero_tape, zero_seq = self._zero_events
        slot = np.minimum(np.searchsorted(tapes, zero_tape), max(len(tapes) - 1, 0))
        if len(tapes):
            clears = (tapes[slot] == zero_tape) & (zero_seq > call_begin[found[first]][slot])
        else:
            clears = np.zeros(len(zero_tape), dtype=bool)
        return found.tolist(), call_end[found].tolist(), np.sort(zero_seq[clears]).tolist()

    @cached_property
    def _fill_cache(self) -> dict[tuple[int, int, int], tuple[list[int], list[int], list[int]]]:
        return {}

    @cached_property
    def _fill_by_calls(self) -> dict[bytes, tuple[list[int], list[int], list[int]]]:
        return {}

    @cached_property
    def _fills_by_alloc(self) -> dict[int, list[tuple[int, int, np.ndarray]]]:
        """alloc -> (lo, hi, filling call indexes) of each gradient memory in it (see :attr:`fill_groups`)."""
        groups = self.fill_groups
        cuts = groups.cuts.tolist()
        table: dict[int, list[tuple[int, int, np.ndarray]]] = {}
        for g, (alloc, lo, hi) in enumerate(
            zip(groups.alloc.tolist(), groups.lo.tolist(), groups.hi.tolist())
        ):
            table.setdefault(alloc, []).append((lo, hi, groups.calls[cuts[g] : cuts[g + 1]]))
        return table

    @cached_property
    def _call_columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Tape, begin seq and end seq of every backward call, by call index."""
        calls = self.backward_calls
        return (
            np.array([call.tape for call in calls], dtype=np.int64),
            np.array([call.begin_seq for call in calls], dtype=np.int64),
            np.array([call.end_seq for call in calls], dtype=np.int64),
        )

    @cached_property
    def _zero_events(self) -> tuple[np.ndarray, np.ndarray]:
        """(tape, seq) of every tape.zero() and tape.reset() event."""
        tapes: list[int] = []
        seqs: list[int] = []
        for tape in self.model.tapes.values():
            cleared = tape.zeros + tape.resets
            tapes += [tape.tape_id] * len(cleared)
            seqs += cleared
        return np.array(tapes, dtype=np.int64), np.array(seqs, dtype=np.int64)

    # ------------------------------------------------------------ what a backward differentiates
    def first_adjoint_seq(self, call: BackwardCall) -> int:
        """Seq of the call's first adjoint launch (its end when it ran none)."""
        m = self.model
        stop = min(call.end_ev, m.n_events)
        adjoint = np.nonzero(m.adjoint[call.begin_ev : stop])[0]
        return int(m.seq[call.begin_ev + adjoint[0]]) if len(adjoint) else call.end_seq

    def seeds(self, call: BackwardCall) -> list[tuple[int, int, int, bool]]:
        """Hand seeds of a backward (cached): see :meth:`_find_seeds`."""
        cached = self._seed_cache.get(call.index)
        if cached is None:
            cached = self._seed_cache[call.index] = self._find_seeds(call)
        return cached

    @cached_property
    def _seed_cache(self) -> dict[int, list[tuple[int, int, int, bool]]]:
        return {}

    @cached_property
    def _objective_cache(self) -> dict[int, set[int]]:
        return {}

    @cached_property
    def _plain_grad_writes(self) -> np.ndarray:
        """Access rows that write a gradient buffer without accumulating (seed candidates)."""
        return self.is_write & self.grad_row_mask & ~self.is_accumulate

    def _find_seeds(self, call: BackwardCall) -> list[tuple[int, int, int, bool]]:
        """Hand seeds of a backward: (event, grad array id, owner array id, from_grad) for each
        gradient buffer given its final value by a copy/assign/fill/store between the previous
        backward call (or the epoch's first event) and the call's first adjoint launch, plus
        ``grads=`` entries (event = the backward_begin). ``from_grad`` is true when the value
        came from another gradient buffer (an adjoint handed over, as in checkpointing) rather
        than a constant. The automatic ``loss=`` seed is not included; zero fills are not seeds."""
        m = self.model
        i = int(np.searchsorted(m.acc_seq, self._seed_window_start(call), side="right"))
        j = int(np.searchsorted(m.acc_seq, self.first_adjoint_seq(call), side="left"))
        rows = i + np.nonzero(self._plain_grad_writes[i:j])[0]
        evs = self.acc_ev[rows]
        own = ~m.adjoint[evs]
        rows, evs = rows[own], evs[own]
        # the first test of _carries_gradient for every candidate at once: it reads a gradient buffer
        others, owner = expand_ranges(m.acc_start[evs], m.acc_stop[evs])
        reads_grad = set(evs[owner[self.is_read[others] & self.grad_row_mask[others]]].tolist())
        return self._seeds_of(call, self._candidate_columns(rows, evs), reads_grad)

    def _candidate_columns(self, rows: np.ndarray, evs: np.ndarray) -> tuple[list[int], ...]:
        """The columns :meth:`_seeds_of` reads of the candidate rows ``rows`` (events ``evs``):
        event, array, allocation, byte bounds, and whether the event is a memset to zero."""
        m = self.model
        values = m.value[evs]
        zero_fill = (m.kind[evs] == self._K[S.MEMSET]) & (np.isnan(values) | (values == 0.0))
        return (
            evs.tolist(),
            m.acc_array[rows].tolist(),
            m.acc_alloc[rows].tolist(),
            self.acc_lo[rows].tolist(),
            self.acc_hi[rows].tolist(),
            zero_fill.tolist(),
        )

    def _seed_window_start(self, call: BackwardCall) -> int:
        """The seq after which :meth:`_find_seeds` looks for hand seeds of ``call``: the previous
        backward call's end, or the seq before its epoch's first event."""
        previous_end = self.backward_calls[call.index - 1].end_seq if call.index > 0 else -1
        epoch = self.epochs[call.epoch]
        return max(previous_end, int(self.model.seq[epoch.events[0]]) - 1 if epoch.events else -1)

    def _find_seeds_many(self, calls: list[BackwardCall]) -> list[list[tuple[int, int, int, bool]]]:
        """:meth:`_find_seeds` of each call, the candidate rows of all of them gathered at once
        (drone: 1,200 calls with 31 candidates each) instead of a dozen array steps per call."""
        m = self.model
        if not calls:
            return []
        # each call's window of rows [i, j): after its start seq, before its first adjoint launch
        begin = np.array([call.begin_ev for call in calls], dtype=np.int64)
        stop = np.minimum(np.array([call.end_ev for call in calls], dtype=np.int64), m.n_events)
        adjoint_evs = np.flatnonzero(m.adjoint)  # first_adjoint_seq of every call
        at = np.minimum(np.searchsorted(adjoint_evs, begin), max(len(adjoint_evs) - 1, 0))
        first = adjoint_evs[at] if len(adjoint_evs) else begin
        ran = (first >= begin) & (first < stop) if len(adjoint_evs) else np.zeros(len(calls), dtype=bool)
        end_seqs = np.array([call.end_seq for call in calls], dtype=np.int64)
        stop_seqs = np.where(ran, m.seq[first], end_seqs)
        start_seqs = np.array([self._seed_window_start(call) for call in calls], dtype=np.int64)
        i = np.searchsorted(m.acc_seq, start_seqs, side="right")
        j = np.searchsorted(m.acc_seq, stop_seqs, side="left")
        # the plain gradient writes in each window, in row order, call after call
        plain = self._plain_grad_write_rows
        a = np.searchsorted(plain, i, side="left")
        b = np.maximum(np.searchsorted(plain, j, side="left"), a)
        taken, call_of = expand_ranges(a, b)
        rows = plain[taken]
        evs = self.acc_ev[rows]
        own = ~m.adjoint[evs]
        rows, evs, call_of = rows[own], evs[own], call_of[own]
        others, owner = expand_ranges(m.acc_start[evs], m.acc_stop[evs])
        reads = np.zeros(len(evs), dtype=bool)
        reads[owner[self.is_read[others] & self.grad_row_mask[others]]] = True
        cuts = np.searchsorted(call_of, np.arange(len(calls) + 1), side="left").tolist()
        columns = self._candidate_columns(rows, evs)
        reads_list = reads.tolist()
        found = []
        for k, call in enumerate(calls):
            lo, hi = cuts[k], cuts[k + 1]
            evs_k = columns[0][lo:hi]
            reads_grad = {ev for ev, read in zip(evs_k, reads_list[lo:hi]) if read}
            found.append(self._seeds_of(call, tuple(column[lo:hi] for column in columns), reads_grad))
        return found

    @cached_property
    def _plain_grad_write_rows(self) -> np.ndarray:
        """The rows of :attr:`_plain_grad_writes`, ascending."""
        return np.flatnonzero(self._plain_grad_writes)

    def _seeds_of(
        self, call: BackwardCall, columns: tuple[list[int], ...], reads_grad: set[int]
    ) -> list[tuple[int, int, int, bool]]:
        """:meth:`_find_seeds` from its candidates: per plain gradient write in the call's window
        by an event that is no adjoint launch (in row order), its event, array id, allocation,
        byte hull and whether it is a zero fill; ``reads_grad``: those events that read a
        gradient buffer."""
        m = self.model
        latest: dict[tuple[int, int, int], tuple[int, int, bool]] = {}
        for ev, array_id, alloc, lo, hi, zero in zip(*columns):
            if call.loss >= 0 and self.owner_of(array_id) == call.loss:
                continue  # the loss= seed
            latest[(alloc, lo, hi)] = (ev, array_id, not zero)
        found = []
        by_grad: dict[int, tuple[int, bool]] = {}
        for ev, grad_id, is_seed in latest.values():
            if is_seed:
                from_grad = ev in reads_grad or self._carries_gradient(ev)
                by_grad[grad_id] = (ev, from_grad)
                if ev > call.begin_ev and m.phase[ev] == S.BACKWARD:
                    continue  # a grads= assign: reported with its key below
                found.append((ev, grad_id, self.owner_of(grad_id), from_grad))
        for array_id in call.grads:
            grad_id = self.grad_array(array_id, call.begin_seq)
            from_grad = by_grad.get(grad_id, (0, False))[1]
            if grad_id < 0 or grad_id not in by_grad:
                adopted = self._adopted_grad(array_id, call)
                grad_id = adopted if adopted >= 0 else grad_id
                from_grad = adopted >= 0 and self.owner_of(adopted) not in (-1, array_id)
            found.append((call.begin_ev, grad_id, array_id, from_grad))
        return found

    def _carries_gradient(self, ev: int) -> bool:
        """Whether the values event ``ev`` writes are an adjoint handed over: it reads a gradient
        buffer, or reads memory whose last writer read one or was an adjoint launch (a gradient
        saved in a plain buffer between checkpoint segments, a hand-run loss adjoint)."""
        m = self.model
        rows = range(int(m.acc_start[ev]), int(m.acc_stop[ev]))
        if any(self.is_read[r] and self.grad_row_mask[r] for r in rows):
            return True
        for r in rows:
            if not self.is_read[r]:
                continue
            for writer_row in self.writers_of_memory(int(m.acc_array[r]), int(m.seq[ev])):
                writer = int(self.acc_ev[writer_row])
                if m.adjoint[writer] or any(
                    self.is_read[w] and self.grad_row_mask[w]
                    for w in range(int(m.acc_start[writer]), int(m.acc_stop[writer]))
                ):
                    return True
                break  # only the newest writer decides what the buffer holds
        return False

    def _adopted_grad(self, array_id: int, call: BackwardCall) -> int:
        """The array ``grads=`` made ``array_id``'s .grad inside the call (set_grad), or -1."""
        changes = self._grad_ids.get(int(array_id), [])
        for seq, grad_id in changes:
            if call.begin_seq <= seq <= call.end_seq:
                return int(grad_id)
        return -1

    def objective_events(self, call: BackwardCall) -> set[int]:
        """Recorded events of the call's epoch whose results reach what the backward
        differentiates (the loss, ``grads=`` keys, hand-seeded outputs): a backward slice
        along def-use edges inside the epoch (cached per call)."""
        cached = self._objective_cache.get(call.index)
        if cached is None:
            self.objective_events_many([call])
            cached = self._objective_cache[call.index]
        return cached

    def objective_events_many(self, calls: list[BackwardCall]) -> list[set[int]]:
        """:meth:`objective_events` of each call, the ones not cached yet sliced together."""
        self._slice_calls(calls)
        return [self._objective_cache[call.index] for call in calls]

    def objective_arrays_many(self, calls: list[BackwardCall]) -> list[np.ndarray]:
        """:meth:`objective_events_many` as ascending int64 arrays of the events (for rules that
        go on in numpy: no set to sort and turn back into an array)."""
        self._slice_calls(calls)
        return [self._objective_arrays[call.index] for call in calls]

    def _slice_calls(self, calls: list[BackwardCall]) -> None:
        todo = {call.index: call for call in calls if call.index not in self._objective_cache}
        if todo:
            arrays = self._slices(list(todo.values()))
            self._objective_arrays.update(arrays)
            self._objective_cache.update((index, set(events.tolist())) for index, events in arrays.items())

    @cached_property
    def _objective_arrays(self) -> dict[int, np.ndarray]:
        return {}

    @cached_property
    def _slice_marks(self) -> tuple[np.ndarray, np.ndarray]:
        """(``stamp``, ``call_of_epoch``) of :meth:`_slices`: per event the mark of the last round
        that reached it (-1: none), and per epoch the call slot of the round running it (-1: none;
        every round resets its epochs)."""
        return (
            np.full(self.model.n_events, -1, dtype=np.int64),
            np.full(len(self.epochs) + 1, -1, dtype=np.int64),
        )

    def _slices(self, calls: list[BackwardCall]) -> dict[int, np.ndarray]:
        """The backward slices of ``calls``, level by level in numpy: the calls go in rounds in
        which no two replay the same epoch, so that an event (which belongs to one epoch) is
        reached for one call of the round at most; ``stamp`` marks the events a round reached.

        ``stamp`` and ``call_of_epoch`` are the dataflow's own (:attr:`_slice_marks`), reused
        by every call with a mark that only grows, so that slicing one call (``objective_events``
        call by call) costs its slice, not a pass over every event."""
        m = self.model
        result: dict[int, np.ndarray] = {}  # per call index, its events ascending
        missing = [call for call in calls if call.index not in self._seed_cache]
        if len(missing) > 1:  # their hand seeds found together
            self._seed_cache.update(zip([call.index for call in missing], self._find_seeds_many(missing)))
        # targets -> the memory queries of writers_of_memory, one per (call, target array) of a
        # known memory, in call order (drone: 37,200 targets, of 31 arrays: looked up per array)
        target_slot: list[int] = []
        target_id: list[int] = []
        for slot, call in enumerate(calls):
            targets = [call.loss] if call.loss >= 0 else []
            targets += [owner for _, _, owner, _ in self.seeds(call) if owner >= 0]
            target_slot += [slot] * len(targets)
            target_id += targets
        q_alloc, q_lo, q_hi = m.memory_of(np.asarray(target_id, dtype=np.int64))
        known = np.nonzero(q_alloc >= 0)[0]
        q_call = np.asarray(target_slot, dtype=np.int64)[known]
        q_alloc, q_lo, q_hi = q_alloc[known], q_lo[known], q_hi[known]
        begin_seq_of_call = np.array([call.begin_seq for call in calls], dtype=np.int64)
        epoch_of_call = np.array([call.epoch for call in calls], dtype=np.int64)
        start_call = np.zeros(0, dtype=np.int64)
        start_ev = np.zeros(0, dtype=np.int64)
        if len(q_call):
            queries, rows = self._writers_for(q_alloc, q_lo, q_hi, begin_seq_of_call[q_call])
            start_call = q_call[queries]
            start_ev = self.acc_ev[rows]
            keep = self.ev_epoch[start_ev] == epoch_of_call[start_call]
            start_call, start_ev = start_call[keep], start_ev[keep]
        # calls in graph replays that copy a template call of the list: its slice, moved
        moved = self._moved_slices(calls, start_call, start_ev)
        if moved:
            sliced = ~np.isin(start_call, np.fromiter(moved, dtype=np.int64, count=len(moved)))
            start_call, start_ev = start_call[sliced], start_ev[sliced]
        # round of each call: how many earlier calls of the list replay the same epoch
        rounds = np.zeros(len(calls), dtype=np.int64)
        seen: dict[int, int] = {}
        for slot, epoch in enumerate(epoch_of_call.tolist()):
            if slot in moved:
                rounds[slot] = -1
                continue
            rounds[slot] = seen.get(epoch, 0)
            seen[epoch] = rounds[slot] + 1
        stamp, call_of_epoch = self._slice_marks
        acc_start, acc_stop, edge_start = m.acc_start, m.acc_stop, self._edge_start
        epoch = self.ev_epoch_narrow  # gathered per edge
        for round_number in range(int(rounds.max(initial=-1)) + 1):
            in_round = np.nonzero(rounds == round_number)[0]
            call_of_epoch[epoch_of_call[in_round]] = in_round
            pick = rounds[start_call] == round_number
            frontier = np.unique(start_ev[pick])
            reached = [frontier]
            self._slice_mark += 1
            mark = self._slice_mark
            stamp[frontier] = mark
            while len(frontier):
                # writer events of the frontier's reads, inside the frontier event's epoch
                edges, origin = expand_ranges(edge_start[acc_start[frontier]], edge_start[acc_stop[frontier]])
                writers = self.edge_writer_ev[edges]
                origin_epoch = epoch[frontier][origin]
                writers = writers[(epoch[writers] == origin_epoch) & (stamp[writers] != mark)]
                if len(writers) * 8 > len(stamp):  # many: marked per event rather than sorted
                    fresh = np.zeros(len(stamp), dtype=bool)
                    fresh[writers] = True
                    frontier = np.flatnonzero(fresh)
                else:
                    frontier = np.unique(writers)
                stamp[frontier] = mark
                reached.append(frontier)
            events = np.concatenate(reached)
            owner = call_of_epoch[self.ev_epoch[events]]
            # by call, then event: distinct keys (a round reaches an event once)
            order = np.argsort((owner + 1) * len(stamp) + events)
            events, owner = events[order], owner[order]
            cuts = np.searchsorted(owner, in_round, side="left").tolist()
            ends = np.searchsorted(owner, in_round, side="right").tolist()
            for slot, a, b in zip(in_round.tolist(), cuts, ends):
                result[calls[slot].index] = events[a:b]
            call_of_epoch[epoch_of_call[in_round]] = -1
        for slot, (template_slot, shift) in moved.items():
            result[calls[slot].index] = result[calls[template_slot].index] + shift
        return result

    def _moved_slices(
        self, calls: list[BackwardCall], start_call: np.ndarray, start_ev: np.ndarray
    ) -> dict[int, tuple[int, int]]:
        """Per slot of ``calls`` whose slice is another call's of the list, moved: (that call's slot,
        the event shift). A call in a graph replay whose reads' edges are its template's, moved
        (``edge_copies``), with its epoch inside the replay, has the slice of the template's call
        at the same place when that call's epoch is inside the template and is the call's,
        moved, and their slices start from the same events, moved: the edges between the events
        of such an epoch are the template epoch's, moved."""
        m = self.model
        copies = self.edge_copies
        first, stop, template = m.replay_runs
        if not copies or len(calls) < 2:
            return {}
        accepted = {(start, row_stop) for start, row_stop, _ in copies}
        begins = np.array([call.begin_ev for call in calls], dtype=np.int64)
        slot_of = {ev: slot for slot, ev in enumerate(begins.tolist())}
        run = np.searchsorted(first, begins, side="right") - 1
        # each call's start events, ascending and distinct
        width = m.n_events + 1
        keys = np.unique(start_call * width + start_ev)
        starts = keys % width
        cuts = np.searchsorted(keys // width, np.arange(len(calls) + 1)).tolist()
        epoch = self.ev_epoch
        moved: dict[int, tuple[int, int]] = {}
        for slot, r in enumerate(run.tolist()):
            if r < 0 or begins[slot] >= stop[r] or template[r] == r:
                continue
            t = int(template[r])
            shift = int(first[r] - first[t])
            template_slot = slot_of.get(int(begins[slot]) - shift)
            if template_slot is None or template_slot in moved:
                continue
            row_start = int(m.acc_start[first[r]])
            if (row_start, int(m.acc_stop[stop[r] - 1])) not in accepted:
                continue
            uid, template_uid = calls[slot].epoch, calls[template_slot].epoch
            events, template_events = self.epochs[uid].events, self.epochs[template_uid].events
            if (
                not events
                or len(events) != len(template_events)
                or not first[r] <= events[0] <= events[-1] < stop[r]
                or not first[t] <= template_events[0] <= template_events[-1] < stop[t]
                or not np.array_equal(
                    epoch[first[r] : stop[r]] == uid, epoch[first[t] : stop[t]] == template_uid
                )
            ):
                continue  # the epochs inside the replays, the same events of them, moved
            mine, theirs = (
                starts[cuts[slot] : cuts[slot + 1]],
                starts[cuts[template_slot] : cuts[template_slot + 1]],
            )
            if np.array_equal(mine - shift, theirs):
                moved[slot] = (template_slot, shift)
        return moved
