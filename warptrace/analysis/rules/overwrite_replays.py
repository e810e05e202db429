"""WT101-WT104's pass (``overwrite_after_read._overwrites``) over the graph replays that copy a
template: the occurrences it finds, kept in pass order, and the replays whose part of the pass
is their template's, moved.

The pass goes through the pending reads and the writes of one allocation after the other, in
seq order, keeping the pending reads of each allocation in a dict (its bucket). A replay that
copies its template (``Model.row_copies``) has the template's rows, so its part of the pass for
one allocation (a run of consecutive positions) decides what the template's run decided, moved,
when nothing outside the run can take part: the reads pending when the run starts are all over
(their backward came before it), no read outside the replay has its tapes, the template
backpropagates its reads inside its own rows, and the facts a decision reads beyond the rows (the
readers' gradient arguments, post-loss launches, ``record_func`` solves, which writes share the
reader's tape) agree. Such a run then only ends the reads pending before it (its first write
consumes them), leaves its own reads pending (over, so that only their number still counts, for
the bucket's clean-up at 256 entries) and repeats the template's occurrences, moved. Consecutive
runs of copies of one template for one allocation (drone: 1,199 runs per allocation, one read
and one write each) are applied together.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from warptrace.analysis.dataflow.base import expand_ranges
from warptrace.analysis.findings import Severity
from warptrace.analysis.model import Model
from warptrace.analysis.rules.overwrite_evidence import Group

# the bucket size from which the pass drops the reads that are over (see _overwrites)
BUCKET_LIMIT = 256


class OccurrenceLog:
    """The pass's occurrences in pass order: (group key, severity, read and write position in the
    pass, the read's backward seq), and the repeats of a template run's occurrences, moved."""

    def __init__(self) -> None:
        self.gid_of: dict[tuple, int] = {}
        self.gid: list[int] = []
        self.severity: list[int] = []
        self.read: list[int] = []
        self.write: list[int] = []
        self.backward: list[int] = []
        # pieces in pass order: (first, stop, row shifts, seq shifts) of occurrences [first, stop),
        # once per shift (None: the logged ones as they are)
        self.pieces: list[tuple[int, int, np.ndarray | None, np.ndarray | None]] = []
        self._open = 0  # the first logged occurrence not in a piece yet

    def add(self, gkey: tuple, severity: Severity, read: int, write: int, backward: int) -> None:
        gid = self.gid_of.get(gkey)
        if gid is None:
            gid = self.gid_of[gkey] = len(self.gid_of)
        self.gid.append(gid)
        self.severity.append(severity)
        self.read.append(read)
        self.write.append(write)
        self.backward.append(backward)

    def mark(self) -> int:
        return len(self.gid)

    def repeat(self, first: int, stop: int, row_shifts: np.ndarray, seq_shifts: np.ndarray) -> None:
        """The occurrences ``first:stop`` again, once per shift, moved (after those logged so far)."""
        self._flush()
        if stop > first:
            self.pieces.append((first, stop, row_shifts, seq_shifts))

    def _flush(self) -> None:
        if len(self.gid) > self._open:
            self.pieces.append((self._open, len(self.gid), None, None))
            self._open = len(self.gid)

    def groups(self, model: Model, rows: np.ndarray) -> dict[tuple, Group]:
        """The groups in order of their first occurrence, each with its occurrences added in
        order (``rows``: the access row of each position of the pass)."""
        self._flush()
        if not self.pieces:
            return {}
        firsts, stops, row_shift, seq_shift = [], [], [], []
        for first, stop, rows_by, seqs_by in self.pieces:
            copies = 1 if rows_by is None else len(rows_by)
            firsts.append(np.full(copies, first, dtype=np.int64))
            stops.append(np.full(copies, stop, dtype=np.int64))
            row_shift.append(np.zeros(1, dtype=np.int64) if rows_by is None else rows_by)
            seq_shift.append(np.zeros(1, dtype=np.int64) if seqs_by is None else seqs_by)
        source, owner = expand_ranges(np.concatenate(firsts), np.concatenate(stops))
        shift_row, shift_seq = np.concatenate(row_shift)[owner], np.concatenate(seq_shift)[owner]
        gid = np.asarray(self.gid, dtype=np.int64)[source]
        severity = np.asarray(self.severity, dtype=np.int64)[source]
        read_row = rows[np.asarray(self.read, dtype=np.int64)[source]] + shift_row
        write_row = rows[np.asarray(self.write, dtype=np.int64)[source]] + shift_row
        backward = np.asarray(self.backward, dtype=np.int64)[source] + shift_seq
        write_seq, read_seq = model.acc_seq[write_row], model.acc_seq[read_row]
        read_array, write_array = model.acc_array[read_row], model.acc_array[write_row]
        alloc = model.acc_alloc[write_row]
        keys = list(self.gid_of)
        order = np.argsort(gid, kind="stable")  # each group's occurrences, in pass order
        cuts = np.searchsorted(gid[order], np.arange(len(keys) + 1))
        first_at = order[cuts[:-1]]
        groups: dict[tuple, Group] = {}
        for g in np.argsort(first_at, kind="stable").tolist():  # groups in order of first occurrence
            mine = order[cuts[g] : cuts[g + 1]]
            at = int(mine[0])
            group = Group(
                keys[g][0],
                Severity(int(severity[at])),
                (int(read_row[at]), int(write_row[at]), int(backward[at])),
            )
            group.add_many(
                Severity(int(severity[mine].max())),
                write_seq[mine],
                read_seq[mine],
                read_array[mine],
                write_array[mine],
                alloc[mine],
            )
            groups[keys[g]] = group
        return groups


@dataclass
class _TemplateRun:
    alloc: int
    reads: int  # pending reads the run adds
    writes: int
    stop: int  # the position after it
    usable: bool = False  # no read pending before it was still at risk, and it has a write
    left: int = 0  # its reads still pending (over) after it
    log_first: int = 0  # its occurrences in the log
    log_stop: int = -1  # -1: not passed yet


@dataclass
class _Block:
    alloc: int
    template_run: int
    stop: int  # the position after it
    row_shifts: np.ndarray
    seq_shifts: np.ndarray


@dataclass
class ReplayRuns:
    """The runs of the pass that copies take from their template's (see the module docstring)."""

    # per position of the pass: 0, or 1 + the template run starting there, or -1 - the block
    mark: list[int]
    template_runs: list[_TemplateRun]
    blocks: list[_Block]
    # per allocation: how many reads, all over, the pass would still hold after the copies it
    # applied (they count towards the bucket's clean-up until a write or the clean-up ends them)
    phantom: dict[int, int] = field(default_factory=dict)

    def open_template(self, run: int, bucket: dict | None, first_seq: int, log: OccurrenceLog) -> int:
        """Before the template run's first position; returns its stop."""
        info = self.template_runs[run]
        entering = len(bucket) if bucket else 0
        info.usable = (
            not bucket or all(read[1] <= first_seq for read in bucket.values())
        ) and entering + self.phantom.get(info.alloc, 0) + info.reads <= BUCKET_LIMIT
        info.log_first = log.mark()
        return info.stop

    def close_template(self, run: int, bucket: dict | None, log: OccurrenceLog) -> None:
        """After the template run's last position."""
        info = self.template_runs[run]
        info.usable = info.usable and info.writes > 0  # its first write ended the reads before it
        info.left = len(bucket) if bucket else 0
        info.log_stop = log.mark()

    def apply_block(self, block_id: int, bucket: dict | None, first_seq: int, log: OccurrenceLog) -> int:
        """The block's runs decided by their template's, when nothing outside them takes part:
        the position after the block, else -1 (the pass goes through its rows)."""
        block = self.blocks[block_id]
        info = self.template_runs[block.template_run]
        if not info.usable or info.log_stop < 0:
            return -1
        entering = len(bucket) if bucket else 0
        if bucket and any(read[1] > first_seq for read in bucket.values()):
            return -1  # a read pending before the first run may be hit in it
        if entering + self.phantom.get(block.alloc, 0) + info.reads > BUCKET_LIMIT:
            return -1  # the bucket's clean-up could run inside the first run
        if len(block.row_shifts) > 1 and info.left + info.reads > BUCKET_LIMIT:
            return -1  # ... or inside a later one
        if bucket:
            bucket.clear()  # the first write of the first run ends them
        if info.left:
            self.phantom[block.alloc] = info.left
        else:
            self.phantom.pop(block.alloc, None)
        log.repeat(info.log_first, info.log_stop, block.row_shifts, block.seq_shifts)
        return block.stop


def plan_replay_runs(
    model: Model,
    rows: np.ndarray,
    is_read: np.ndarray,
    bwd: np.ndarray,
    grad_args: dict[int, frozenset[str] | None],
    solves: dict[int, list],
    post_loss: dict[int, tuple[int, int, int]],
) -> ReplayRuns | None:
    """The template runs and blocks of copied runs of the pass over ``rows`` (access rows in pass
    order; ``is_read``, ``bwd``: per position, a read and its backward seq); ``grad_args``: the
    gradient arguments of each reading event (``grad_args_many``).
    None when no replay copies its template's part of the pass."""
    copies = model.row_copies
    if not copies or not len(rows):
        return None
    start = np.asarray([c[0] for c in copies], dtype=np.int64)
    stop = np.asarray([c[1] for c in copies], dtype=np.int64)
    template = np.asarray([c[2] for c in copies], dtype=np.int64)
    shift_row = start - template
    shift_seq = model.acc_seq[start] - model.acc_seq[template]
    n = len(rows)
    ev = model.acc_ev[rows]
    tape = model.tape[ev]
    # per position: the copy it lies in (-1: none), and the template (index into `tmpl_first`)
    at = np.searchsorted(start, rows, side="right") - 1
    copy_of = np.where((at >= 0) & (rows < stop[np.maximum(at, 0)]), at, -1)
    tmpl_first, tmpl_of_copy = np.unique(template, return_inverse=True)
    tmpl_of_copy = tmpl_of_copy.reshape(-1)
    tmpl_stop = np.zeros(len(tmpl_first), dtype=np.int64)
    tmpl_stop[tmpl_of_copy] = template + (stop - start)
    at = np.searchsorted(tmpl_first, rows, side="right") - 1
    tmpl_at = np.where((at >= 0) & (rows < tmpl_stop[np.maximum(at, 0)]), at, -1)
    by_row = np.argsort(rows, kind="stable")  # positions in row order
    ok = np.zeros(len(copies), dtype=bool)
    last_seq = model.acc_seq[tmpl_stop - 1]
    for t in range(len(tmpl_first)):
        mine = np.nonzero(tmpl_of_copy == t)[0]
        t_pos = by_row[tmpl_at[by_row] == t]
        k = len(t_pos)
        t_read = is_read[t_pos] != 0
        if k == 0 or not np.all(bwd[t_pos][t_read] <= last_seq[t]):
            continue  # nothing to copy, or a read of the template backpropagated after it
        c_pos = by_row[np.isin(copy_of[by_row], mine)]  # copies in row order, then rows
        counts = np.bincount(copy_of[c_pos], minlength=len(copies))[mine]
        if not np.all(counts == k):
            same_count = mine[counts == k]
            c_pos = c_pos[np.isin(copy_of[c_pos], same_count)]
            mine = same_count
        if not len(mine):
            continue
        c_pos = c_pos.reshape(len(mine), k)
        good = np.all(rows[c_pos] - shift_row[mine][:, None] == rows[t_pos][None, :], axis=1)
        good &= np.all(is_read[c_pos] == is_read[t_pos][None, :], axis=1)
        moved_bwd = np.where(t_read[None, :], bwd[c_pos] - shift_seq[mine][:, None], bwd[c_pos])
        good &= np.all(moved_bwd == bwd[t_pos][None, :], axis=1)
        # the copy's tapes are the template's, renumbered by one shift (equal tapes stay equal)
        t_tape, c_tape = tape[t_pos], tape[c_pos]
        taped = t_tape >= 0
        good &= np.all(np.where(taped[None, :], c_tape >= 0, c_tape == t_tape[None, :]), axis=1)
        if taped.any():
            first = int(np.argmax(taped))
            good &= np.all(
                ~taped[None, :] | (c_tape - t_tape[None, :] == (c_tape[:, first] - t_tape[first])[:, None]),
                axis=1,
            )
        # what a decision reads beyond the rows: the reader's gradient arguments, solves, post-loss
        reads = np.nonzero(t_read)[0]
        t_grads = [grad_args[e] for e in ev[t_pos[reads]].tolist()]
        for i, copy_evs in enumerate(ev[c_pos[:, reads]].tolist()):
            if good[i] and [grad_args[e] for e in copy_evs] != t_grads:
                good[i] = False
        if solves:
            solved = np.fromiter(solves, dtype=np.int64, count=len(solves))
            good &= ~np.isin(t_tape[reads], solved).any() & ~np.isin(c_tape[:, reads], solved).any(axis=1)
        if post_loss:
            later = np.fromiter(post_loss, dtype=np.int64, count=len(post_loss))
            writes = np.nonzero(~t_read)[0]
            good &= ~np.isin(ev[t_pos[writes]], later).any() & ~np.isin(ev[c_pos[:, writes]], later).any(
                axis=1
            )
        ok[mine[good]] = True
    # no read outside a copy has one of its tapes (a later read with the same pending key would
    # take the place of the copy's read in the bucket, which the copy no longer fills)
    read_pos = np.nonzero(is_read != 0)[0]
    unit, read_tape = copy_of[read_pos], tape[read_pos]
    tapes, tape_code = np.unique(read_tape, return_inverse=True)
    pairs = np.unique(tape_code.reshape(-1) * (len(copies) + 1) + (unit + 1))  # distinct (tape, copy)
    crowded_tapes = np.nonzero(np.bincount(pairs // (len(copies) + 1), minlength=len(tapes)) > 1)[0]
    crowded = np.isin(read_tape, tapes[crowded_tapes]) & (unit >= 0)
    ok[unit[crowded]] = False
    if not ok.any():
        return None

    # runs: consecutive positions of one allocation inside one copy (or template) of a usable copy
    alloc = model.acc_alloc[rows]
    in_copy = (copy_of >= 0) & ok[np.maximum(copy_of, 0)]
    used_tmpl = np.zeros(len(tmpl_first), dtype=bool)
    used_tmpl[tmpl_of_copy[ok]] = True
    in_tmpl = (tmpl_at >= 0) & used_tmpl[np.maximum(tmpl_at, 0)]
    mark = [0] * n
    template_runs: list[_TemplateRun] = []
    run_of: dict[tuple[int, int], int] = {}  # (allocation, template) -> template run
    t_pos = np.nonzero(in_tmpl)[0]
    if len(t_pos):
        key = np.stack((alloc[t_pos], tmpl_at[t_pos]))
        cut = np.nonzero(np.any(key[:, 1:] != key[:, :-1], axis=0) | (np.diff(t_pos) != 1))[0] + 1
        firsts = np.concatenate(([0], cut))
        stops = np.append(cut, len(t_pos))
        reads = np.add.reduceat((is_read[t_pos] != 0).astype(np.int64), firsts)
        for a, b, n_reads in zip(firsts.tolist(), stops.tolist(), reads.tolist()):
            p = int(t_pos[a])
            run_of[(int(alloc[p]), int(tmpl_at[p]))] = len(template_runs)
            mark[p] = 1 + len(template_runs)
            template_runs.append(_TemplateRun(int(alloc[p]), n_reads, b - a - n_reads, int(t_pos[b - 1]) + 1))
    blocks: list[_Block] = []
    c_pos = np.nonzero(in_copy)[0]
    if len(c_pos):
        c_tmpl = tmpl_of_copy[copy_of[c_pos]]
        key = np.stack((alloc[c_pos], c_tmpl))
        cut = np.nonzero(np.any(key[:, 1:] != key[:, :-1], axis=0) | (np.diff(c_pos) != 1))[0] + 1
        for a, b in zip(np.concatenate(([0], cut)).tolist(), np.append(cut, len(c_pos)).tolist()):
            p = int(c_pos[a])
            run = run_of.get((int(alloc[p]), int(c_tmpl[a])))
            if run is None:
                continue
            members = np.unique(copy_of[c_pos[a:b]])  # ascending: the copies in pass order
            mark[p] = -1 - len(blocks)
            blocks.append(
                _Block(int(alloc[p]), run, int(c_pos[b - 1]) + 1, shift_row[members], shift_seq[members])
            )
    return ReplayRuns(mark, template_runs, blocks)
