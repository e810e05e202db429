"""One run reduced to what ``diff`` compares, with trace-local ids (see ``align`` for the mapping).

A :class:`Profile` is built from a trace in one pass over its model and keeps no
per-event objects: the analysis report, the call sites, the folded sequence of
program steps (tokens), per-argument buffer statistics, array groups with their
gradient flags, the tapes, kernel facts and the parameter-to-loss gradient paths.
The model is dropped afterwards, so diffing two large runs holds one model at a time.

Vocabulary:

- a **token** is one kind of program step: (event kind, kernel, call site) plus the
  attributes that change gradients (tape, recorded on it, loss of a backward call);
- an **array group** is the user's name for memory: the allocation site and label of
  an array (every ``wp.zeros`` of a loop body is one group);
- a **slot** is one argument (and struct field) of one token: which groups and how many
  distinct buffers it touched over the run.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from warptrace.analysis.bridges import bridges_of
from warptrace.analysis.dataflow import combine_codes, dataflow_of
from warptrace.analysis.diff.align import Item, Site, fold
from warptrace.analysis.diff.numbers import NumericSummary, numeric_summary
from warptrace.analysis.model import K, Model
from warptrace.analysis.report import Report, analyze_model, build_model
from warptrace.trace import schema as S
from warptrace.trace.reader import Trace

# event kinds that are program steps (forward phase, not nested in another event)
STEP_KINDS = (
    S.LAUNCH, S.CMD_LAUNCH, S.COPY, S.MEMSET, S.NATIVE, S.VALUE_READ,
    S.TAPE_ZERO, S.TAPE_RESET, S.BACKWARD_BEGIN, S.RECORD_FUNC,
)  # fmt: skip
UNTAPED = -1  # tape role of an event outside any tape
UNKNOWN_TAPE = -2  # a tape whose creation was not recorded

GroupKey = tuple[int, str]  # (allocation site id, array name)


@dataclass(frozen=True)
class Token:
    """One kind of program step; ``tape`` is the call site that created its tape (or UNTAPED)."""

    kind: str
    kernel: str  # kernel key of a launch, "" otherwise
    site: int
    tape: int
    recorded: bool
    loss: GroupKey | None  # the array a backward call differentiates
    subjects: tuple[str, ...] = ()  # a tape.record_func: the names of the arrays it declares


@dataclass
class Slot:
    """What one argument of one token touched over the run."""

    occurrences: int  # events
    buffers: int  # distinct allocations
    groups: tuple[GroupKey, ...]  # array groups, most used first (at most 4)
    written: bool


@dataclass
class Group:
    """Arrays allocated at one site under one name."""

    key: GroupKey
    name: str  # user label, "" when the line has none
    arrays: int = 0
    requires_grad: int = 0  # how many of them had requires_grad when first used
    retain_grad: int = 0


@dataclass(frozen=True)
class KernelFacts:
    key: str
    file: str
    line: int  # the `def` line
    enable_backward: bool
    custom_grad: tuple[str, ...]
    custom_replay: tuple[str, ...]
    signature: tuple[str, ...]  # argument names in order
    in_place: tuple[str, ...]  # arguments (and fields) read and stored by one launch
    source: str  # normalized source text (line shifts do not change it)


@dataclass
class Profile:
    """What ``diff`` needs of one run (trace-local ids)."""

    path: str
    meta: dict[str, Any]
    report: Report
    sites: dict[int, Site]
    tokens: list[Token]
    steps: list[Item]  # folded program steps (token ids and loops)
    token_events: np.ndarray  # events per token id
    slots: dict[tuple[int, str], Slot]  # (token id, "arg" or "arg.field") -> slot
    groups: dict[GroupKey, Group]
    tapes: dict[int, int]  # tape creation site -> number of tapes created there
    kernels: dict[str, KernelFacts]
    kernels_at: dict[int, frozenset[str]]  # site -> kernel keys launched there
    grad_paths: set[tuple[GroupKey, GroupKey]]  # (parameter group, loss group)
    numbers: NumericSummary | None = None
    # call site -> the values its fills wrote (``x.grad.fill_(v)``: a hand seed's weight), sorted
    fills_at: dict[int, tuple[float, ...]] = field(default_factory=dict)
    # call site -> how many of its torch imports made the Warp grad a torch leaf's own .grad
    leaf_imports_at: dict[int, int] = field(default_factory=dict)


def build_profile(trace: Trace) -> Profile:
    """Analyze ``trace`` and reduce it to a :class:`Profile`."""
    model = build_model(trace)
    report = analyze_model(model)
    profile = _Builder(model, report).profile()
    report.model = None  # the profile keeps the findings, not the run's model
    return profile


class _Builder:
    def __init__(self, model: Model, report: Report) -> None:
        self.m = model
        self.report = report
        self.df = dataflow_of(model)

    def profile(self) -> Profile:
        m = self.m
        sites = {
            int(site_id): Site(
                site_id=int(site_id),
                file=row.get("file") or "",
                line=int(row.get("line") or 0),
                function=row.get("function") or "",
                text=row.get("text") or "",
                label=row.get("label") or "",
            )
            for site_id, row in m.sites.items()
        }
        self.array_group = self._array_groups()
        tokens, ev_token = self._tokens()
        steps = fold(ev_token[ev_token >= 0])
        token_events = np.bincount(ev_token[ev_token >= 0], minlength=len(tokens))
        kernels_at: dict[int, set[str]] = defaultdict(set)
        for token in tokens:
            if token.kernel:
                kernels_at[token.site].add(token.kernel)
        return Profile(
            path=str(m.trace.path),
            meta=dict(m.meta),
            report=self.report,
            sites=sites,
            tokens=tokens,
            steps=steps,
            token_events=token_events,
            slots=self._slots(ev_token),
            groups=self.groups,
            tapes=self._tapes(),
            kernels=self._kernels(),
            kernels_at={site: frozenset(keys) for site, keys in kernels_at.items()},
            grad_paths=self._grad_paths(ev_token),
            numbers=numeric_summary(m.trace),
            fills_at=self._fills_at(),
            leaf_imports_at=self._leaf_imports_at(),
        )

    def _fills_at(self) -> dict[int, tuple[float, ...]]:
        """The distinct values each call site's fills wrote (forward phase, a few per site)."""
        m = self.m
        evs = np.nonzero((m.kind == K[S.MEMSET]) & (m.phase == S.FORWARD) & ~np.isnan(m.value))[0]
        found: dict[int, set[float]] = defaultdict(set)
        for site, value in zip(m.site[evs].tolist(), m.value[evs].tolist()):
            if len(found[site]) < 4:
                found[site].add(float(value))
        return {site: tuple(sorted(values)) for site, values in found.items()}

    def _leaf_imports_at(self) -> dict[int, int]:
        counts: dict[int, int] = defaultdict(int)
        for found in bridges_of(self.m).imports:
            counts[int(self.m.site[found.ev])] += int(found.leaf)
        return dict(counts)

    # ------------------------------------------------------------ arrays
    def _array_groups(self) -> np.ndarray:
        """Group code per array id (dense, -1 for none); fills ``self.groups``/``self.group_keys``.

        Vectorized over the arrays table (a run allocating per step has a million arrays):
        the root of each view chain, the owner of each gradient, the allocation site
        (``Model.allocation_site``), then one group per (site, name)."""
        m, df = self.m, self.df
        table = m.trace.tables["arrays"]
        ids = _ints(table, "array_id")
        size = int(ids.max()) + 2 if len(ids) else 1
        self.groups: dict[GroupKey, Group] = {}
        self.group_keys: list[GroupKey] = []
        codes = np.full(size, -1, dtype=np.int64)
        self.alloc_site = np.full(size, -1, dtype=np.int64)
        if len(ids) == 0:
            return codes
        present = np.zeros(size, dtype=bool)
        present[ids] = True

        def dense(column: str) -> np.ndarray:
            out = np.full(size, -1, dtype=np.int64)
            out[ids] = _ints(table, column)
            return out

        base, grad_of, site, alloc = dense("base_id"), dense("grad_of"), dense("site"), dense("alloc_id")
        kinds = table.column("kind").fill_null("").to_numpy(zero_copy_only=False)
        kind = np.full(size, "", dtype=object)
        kind[ids] = kinds
        label_codes = pc.dictionary_encode(table.column("label").fill_null("")).combine_chunks()
        labels = label_codes.dictionary.to_pylist()
        label = np.full(size, -1, dtype=np.int64)
        label[ids] = label_codes.indices.to_numpy(zero_copy_only=False)
        # root of each view chain
        root = np.arange(size, dtype=np.int64)
        for _ in range(64):
            up = base[root]
            step = (up >= 0) & (up < size)
            step[step] = present[up[step]]
            if not np.any(step):
                break
            root = np.where(step, up, root)
        # owner of each gradient root (grad_of at registration, or a later `.grad =`)
        owner = np.where(grad_of >= 0, grad_of, -1)
        for grad_id, owner_id in df.grad_owner.items():
            if 0 <= grad_id < size and owner[grad_id] < 0:
                owner[grad_id] = owner_id
        is_grad = (kind == S.ARRAY_GRAD) | (owner >= 0)
        target = np.where(is_grad[root] & (owner[root] >= 0), owner[root], root)
        target = np.where((target >= 0) & (target < size), root[np.clip(target, 0, size - 1)], target)
        grad_group = is_grad[root] & (owner[root] >= 0)
        # allocation site of the target: its own when owned, else an owned array of its memory,
        # else the allocation's, else its own
        owned = (kind == S.ARRAY_OWNED) & (site >= 0) & present
        max_alloc = int(max(alloc.max(), 0)) + 1
        owned_site = np.full(max_alloc + 1, -1, dtype=np.int64)
        owned_ids = ids[owned[ids]]
        if len(owned_ids):
            allocs_of, first = np.unique(alloc[owned_ids], return_index=True)
            keep = allocs_of >= 0
            owned_site[allocs_of[keep]] = site[owned_ids[first[keep]]]
        alloc_table_site = np.full(max_alloc + 1, -1, dtype=np.int64)
        allocs = m.trace.tables["allocs"]
        if allocs.num_rows:
            alloc_ids = _ints(allocs, "alloc_id")
            inside = (alloc_ids >= 0) & (alloc_ids <= max_alloc)
            alloc_table_site[alloc_ids[inside]] = _ints(allocs, "site")[inside]
        t_alloc = np.clip(alloc[target], 0, max_alloc)
        has_alloc = alloc[target] >= 0
        where = np.where(owned[target], site[target], -1)
        where = np.where((where < 0) & has_alloc, owned_site[t_alloc], where)
        where = np.where((where < 0) & has_alloc, alloc_table_site[t_alloc], where)
        where = np.where(where < 0, site[target], where)
        # one group per (site, name, gradient or not)
        key_codes = combine_codes([where[ids], label[target[ids]] + 1, grad_group[ids].astype(np.int64)])
        _, first_of, group_of = np.unique(key_codes, return_index=True, return_inverse=True)
        for index in first_of.tolist():
            array_id = int(ids[index])
            name = labels[label[target[array_id]]] if label[target[array_id]] >= 0 else ""
            key: GroupKey = (int(where[array_id]), name + (".grad" if grad_group[array_id] else ""))
            self.group_keys.append(key)
            self.groups.setdefault(key, Group(key=key, name=key[1]))
        codes[ids] = group_of.reshape(-1)
        self.alloc_site[ids] = where[ids]
        user_kind = np.isin(kind[ids].astype(str), list(_USER_ARRAY_KINDS))
        user = ids[(root[ids] == ids) & ~grad_group[ids] & ~is_grad[ids] & user_kind].tolist()
        if user:
            users = np.asarray(user, dtype=np.int64)
            first_use = np.full(size, np.iinfo(np.int64).max, dtype=np.int64)
            valid = (m.acc_array >= 0) & (m.acc_array < size)
            np.minimum.at(first_use, m.acc_array[valid], m.acc_seq[valid])
            last = int(m.seq[-1]) + 1 if m.n_events else 0
            when = np.where(first_use[users] == np.iinfo(np.int64).max, last, first_use[users])
            has_grad = df.has_grad_many(users, when)
            # retain_grad: the registered flag, corrected by the arrays a set_retain_grad event names
            retain_flag = np.zeros(size, dtype=bool)
            retain_flag[ids] = table.column("retain_grad").fill_null(False).to_numpy(zero_copy_only=False)
            retain = retain_flag[users]
            changed = set(m.array_id[m.kind == K[S.SET_RETAIN_GRAD]].tolist())
            for i in [i for i, a in enumerate(user) if a in changed]:
                retain[i] = df.retains_grad(user[i], int(when[i]))
            n = len(self.group_keys)
            groups_of = codes[users]
            arrays = np.bincount(groups_of, minlength=n)
            with_grad = np.bincount(groups_of, weights=has_grad, minlength=n)
            retained = np.bincount(groups_of, weights=retain, minlength=n)
            for code in np.nonzero(arrays)[0].tolist():
                group = self.groups[self.group_keys[code]]
                group.arrays += int(arrays[code])
                group.requires_grad += int(with_grad[code])
                group.retain_grad += int(retained[code])
        return codes

    # ------------------------------------------------------------ tokens
    def _tapes(self) -> dict[int, int]:
        counts: dict[int, int] = defaultdict(int)
        for tape in self.m.tapes.values():
            counts[self._tape_site(tape.tape_id)] += 1
        return dict(counts)

    def _tape_site(self, tape_id: int) -> int:
        tape = self.m.tapes.get(int(tape_id))
        if tape is None:
            return UNTAPED if tape_id < 0 else UNKNOWN_TAPE
        return int(self.m.site[tape.created_ev]) if tape.created_ev >= 0 else UNKNOWN_TAPE

    def _tokens(self) -> tuple[list[Token], np.ndarray]:
        """The token table and the token id of every event (-1 for events that are not steps)."""
        m = self.m
        step = np.isin(m.kind, [K[kind] for kind in STEP_KINDS]) & (m.parent < 0) & ~m.adjoint
        step &= (m.phase == S.FORWARD) | (m.kind == K[S.BACKWARD_BEGIN])
        step &= ~self._allocation_copies()
        evs = np.nonzero(step)[0]
        ev_token = np.full(m.n_events, -1, dtype=np.int64)
        if len(evs) == 0:
            return [], ev_token
        tape_ids = m.tape[evs].astype(np.int64)
        loss_group = np.full(len(evs), -1, dtype=np.int64)
        is_backward = m.kind[evs] == K[S.BACKWARD_BEGIN]
        loss_ids = m.array_id[evs[is_backward]]
        loss_group[is_backward] = self._group_of(loss_ids)
        # the tape as a role (the line that created it), so one tape per iteration is one tape
        tape_site = np.array([UNTAPED] + [self._tape_site(t) for t in range(int(tape_ids.max()) + 1)])
        tape_role = tape_site[np.maximum(tape_ids, -1) + 1]
        columns = [m.kind[evs], m.kernel[evs], m.site[evs], tape_role, m.recorded[evs], loss_group]
        codes = combine_codes(columns)
        _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
        ev_token[evs] = inverse.reshape(-1)
        tokens = []
        for index in first.tolist():
            ev = int(evs[index])
            kernel = m.kernels.get(int(m.kernel[ev]))
            loss = int(loss_group[index])
            tokens.append(
                Token(
                    kind=S.EVENT_KINDS[int(m.kind[ev])],
                    kernel=kernel.key if kernel is not None else "",
                    site=int(m.site[ev]),
                    tape=self._tape_site(int(m.tape[ev])),
                    recorded=bool(m.recorded[ev]),
                    loss=self.group_keys[loss] if loss >= 0 else None,
                    subjects=self._declared_names(ev) if m.kind[ev] == K[S.RECORD_FUNC] else (),
                )
            )
        return tokens, ev_token

    def _declared_names(self, ev: int) -> tuple[str, ...]:
        """The names of the arrays a ``tape.record_func(backward, arrays=...)`` event declares."""
        return tuple(self.m.array_label(i) for i in self.m.declared_arrays(ev))

    def _allocation_copies(self) -> np.ndarray:
        """Per event: an untaped copy into an array allocated on the same line (``wp.array(data)``,
        ``clone``): part of an allocation, not a program step."""
        m = self.m
        out = np.zeros(m.n_events, dtype=bool)
        if len(m.acc_seq) == 0:
            return out
        acc_ev = self.df.acc_ev
        rows = np.nonzero((m.kind[acc_ev] == K[S.COPY]) & ~m.recorded[acc_ev])[0]
        rows = rows[m.acc_arg[rows] == "dest"]
        if len(rows) == 0:
            return out
        dest = m.acc_array[rows]
        inside = (dest >= 0) & (dest < len(self.alloc_site))
        sites = np.where(inside, self.alloc_site[np.clip(dest, 0, max(len(self.alloc_site) - 1, 0))], -2)
        out[acc_ev[rows[sites == m.site[acc_ev[rows]]]]] = True
        return out

    def _group_of(self, array_ids: np.ndarray) -> np.ndarray:
        """Array group code of each array id (-1 for unknown ids)."""
        table = self.array_group
        inside = (array_ids >= 0) & (array_ids < len(table))
        return np.where(inside, table[np.clip(array_ids, 0, max(len(table) - 1, 0))], -1)

    def _slots(self, ev_token: np.ndarray) -> dict[tuple[int, str], Slot]:
        m = self.m
        rows = np.nonzero(ev_token[self.df.acc_ev] >= 0)[0] if len(m.acc_seq) else np.zeros(0, np.int64)
        slots: dict[tuple[int, str], Slot] = {}
        if len(rows) == 0:
            return slots
        token = ev_token[self.df.acc_ev[rows]]
        arg_code = m.acc_arg_code[rows].astype(np.int64)
        field_code = m.acc_field_code[rows].astype(np.int64)
        slot_code = combine_codes([token, arg_code, field_code])
        uniq, first, slot_of_row = np.unique(slot_code, return_index=True, return_inverse=True)
        slot_of_row = slot_of_row.reshape(-1)
        occurrences = np.bincount(slot_of_row, minlength=len(uniq))
        alloc_pairs = np.unique(combine_codes([slot_of_row, m.acc_alloc[rows]]), return_index=True)[1]
        buffers = np.bincount(slot_of_row[alloc_pairs], minlength=len(uniq))
        written = np.zeros(len(uniq), dtype=bool)
        np.logical_or.at(written, slot_of_row, (m.acc_role[rows] & S.ROLE_WRITE) != 0)
        groups = self._group_of(m.acc_array[rows])
        _, pair_first, pair_count = np.unique(
            combine_codes([slot_of_row, groups + 1]), return_index=True, return_counts=True
        )
        by_slot: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for row_index, count in zip(pair_first.tolist(), pair_count.tolist()):
            group = int(groups[row_index])
            if group >= 0:
                by_slot[int(slot_of_row[row_index])].append((count, group))
        for slot, row_index in enumerate(first.tolist()):
            name = str(m.acc_arg[rows[row_index]])
            field_path = str(m.acc_field[rows[row_index]])
            arg = f"{name}.{field_path}" if field_path else name
            ranked = sorted(by_slot.get(slot, ()), key=lambda pair: (-pair[0], pair[1]))
            slots[(int(token[row_index]), arg)] = Slot(
                occurrences=int(occurrences[slot]),
                buffers=int(buffers[slot]),
                groups=tuple(self.group_keys[g] for _, g in ranked[:4]),
                written=bool(written[slot]),
            )
        return slots

    # ------------------------------------------------------------ kernels
    def _kernels(self) -> dict[str, KernelFacts]:
        facts: dict[str, KernelFacts] = {}
        for kernel in self.m.kernels.values():
            top = sorted((a for a in kernel.args if not a.field), key=lambda a: a.index)
            in_place = sorted(
                (f"{a.name}.{a.field}" if a.field else a.name)
                for a in kernel.args
                if a.is_array and a.read and a.store
            )
            source = "\n".join(
                line.strip()
                for line in kernel.source.splitlines()
                if line.strip() and not line.strip().startswith("#")
            )
            facts[kernel.key] = KernelFacts(
                key=kernel.key,
                file=kernel.file,
                line=kernel.line,
                enable_backward=kernel.enable_backward,
                custom_grad=tuple(kernel.custom_grad),
                custom_replay=tuple(kernel.custom_replay),
                signature=tuple(a.name for a in top),
                in_place=tuple(in_place),
                source=source,
            )
        return facts

    # ------------------------------------------------------------ gradient paths
    def _grad_paths(self, ev_token: np.ndarray) -> set[tuple[GroupKey, GroupKey]]:
        """(parameter, loss) pairs joined by a gradient path in some backward call.

        Over the recorded dataflow of each tape recording: a def-use edge between two
        recorded events of one recording carries gradient when the array read has a
        ``.grad``. Collapsed onto tokens (the graph has one node per program step kind),
        so a 1M-launch run costs a few numpy passes plus a search over a small graph."""
        m, df = self.m, self.df
        paths: set[tuple[GroupKey, GroupKey]] = set()
        if not df.backward_calls or len(df.edge_reader) == 0:
            return paths
        epoch = df.ev_epoch
        reader_ev, writer_ev = df.edge_reader_ev, df.edge_writer_ev
        same = (epoch[reader_ev] >= 0) & (epoch[reader_ev] == epoch[writer_ev]) & (writer_ev != reader_ev)
        grad_row = df.grad_row_mask
        # reads whose bytes some event of the same recording produced
        produced = np.zeros(len(m.acc_seq), dtype=bool)
        produced[df.edge_reader[same]] = True
        carries = same & ~grad_row[df.edge_reader]
        edge_rows = df.edge_reader[carries]
        carries_idx = np.nonzero(carries)[0]
        has = df.has_grad_many(m.acc_array[edge_rows], m.acc_seq[edge_rows])
        carries_idx = carries_idx[has]
        edges = np.unique(
            combine_codes([ev_token[writer_ev[carries_idx]], ev_token[reader_ev[carries_idx]]]),
            return_index=True,
        )[1]
        readers_of: dict[int, set[int]] = defaultdict(set)  # token -> tokens it feeds
        for i in carries_idx[edges].tolist():
            readers_of[int(ev_token[writer_ev[i]])].add(int(ev_token[reader_ev[i]]))
        # leaves: reads (in a recording) of arrays with a gradient that nothing recorded produced
        acc_ev = df.acc_ev
        read_rows = np.nonzero(df.is_read & (epoch[acc_ev] >= 0) & ~produced & ~grad_row)[0]
        leaf_ok = df.has_grad_many(m.acc_array[read_rows], m.acc_seq[read_rows])
        read_rows = read_rows[leaf_ok]
        leaf_groups = self._group_of(m.acc_array[read_rows])
        leaf_pairs = np.unique(
            combine_codes([ev_token[acc_ev[read_rows]], leaf_groups + 1]), return_index=True
        )[1]
        leaves_of: dict[int, set[int]] = defaultdict(set)  # token -> parameter groups it reads
        for i in leaf_pairs.tolist():
            if leaf_groups[i] >= 0:
                leaves_of[int(ev_token[acc_ev[read_rows[i]]])].add(int(leaf_groups[i]))
        # reverse reachability from the steps that wrote each backward call's loss
        writers_of: dict[int, set[int]] = defaultdict(set)
        for writer, readers in readers_of.items():
            for reader in readers:
                writers_of[reader].add(writer)
        done: set[tuple[int, frozenset[int]]] = set()
        for loss_group, starts in self._loss_writers(ev_token):
            if (loss_group, starts) in done:
                continue
            done.add((loss_group, starts))
            seen = set(starts)
            work = list(starts)
            while work:
                token = work.pop()
                for group in leaves_of.get(token, ()):
                    paths.add((self.group_keys[group], self.group_keys[loss_group]))
                for writer in writers_of.get(token, ()):
                    if writer not in seen:
                        seen.add(writer)
                        work.append(writer)
        return paths

    def _loss_writers(self, ev_token: np.ndarray) -> list[tuple[int, frozenset[int]]]:
        """Per backward call: the group of what it differentiates (the loss, or each ``grads=``
        key) and the steps of its recording that wrote that memory. One vectorized pass over
        the write rows, not one search per call (a training run makes thousands of calls)."""
        m, df = self.m, self.df
        targets: list[tuple[int, int, int]] = []  # (epoch, array id, loss group)
        for call in df.backward_calls:
            for array_id in [call.loss] if call.loss >= 0 else list(call.grads):
                info = m.arrays.get(int(array_id))
                if info is not None and info.alloc_id >= 0 and 0 <= array_id < len(self.array_group):
                    targets.append((call.epoch, int(array_id), int(self.array_group[array_id])))
        if not targets:
            return []
        epoch_of_row = df.ev_epoch[df.acc_ev]
        rows = np.nonzero(df.is_write & (epoch_of_row >= 0) & (m.acc_alloc >= 0))[0]
        span = int(m.acc_alloc.max()) + 2 if len(m.acc_alloc) else 2
        row_keys = epoch_of_row[rows] * span + m.acc_alloc[rows]
        wanted = {epoch * span + m.arrays[array_id].alloc_id for epoch, array_id, _ in targets}
        rows = rows[np.isin(row_keys, np.fromiter(wanted, dtype=np.int64, count=len(wanted)))]
        by_key: dict[int, set[int]] = defaultdict(set)
        for key, token in zip(
            (epoch_of_row[rows] * span + m.acc_alloc[rows]).tolist(), ev_token[df.acc_ev[rows]].tolist()
        ):
            if token >= 0:
                by_key[key].add(token)
        result = []
        for epoch, array_id, group in targets:
            starts = by_key.get(epoch * span + m.arrays[array_id].alloc_id)
            if starts:
                result.append((group, frozenset(starts)))
        return result


# arrays a user allocates (not grads, views, or the numpy source of a wp.array(data) copy)
_USER_ARRAY_KINDS = frozenset({S.ARRAY_OWNED, S.ARRAY_PTR_ALIAS, S.ARRAY_PREEXISTING})


def _ints(table: pa.Table, column: str) -> np.ndarray:
    return table.column(column).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
