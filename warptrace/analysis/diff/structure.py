"""Structural changes between two profiles: steps, buffers, gradient flags, tapes, kernels, paths.

Steps are aligned in ``steps``. Everything else is compared as maps keyed by role, so
each difference is said once however often it occurred:

- **buffers per argument** of matched steps: how many distinct allocations an argument
  touched over the run ("`state`: 2 buffers shared across 60 steps → 61 distinct"),
  which arrays, which arguments a step writes;
- **array groups** (allocation site and name): ``requires_grad``/``retain_grad`` flips
  and how many arrays were allocated;
- **tapes** by the line that creates them: added, removed, merged, split;
- **kernels** by key: ``enable_backward``, custom adjoints and replay functions,
  arguments read and stored in place, signature, source;
- **gradient paths** from each parameter to each loss both runs differentiate.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable

from warptrace.analysis.diff.changes import Change
from warptrace.analysis.diff.profile import UNKNOWN_TAPE, UNTAPED, GroupKey, Slot
from warptrace.analysis.diff.sides import Comparison, Side, plural
from warptrace.analysis.diff.steps import StepDiff
from warptrace.analysis.findings import Location
from warptrace.trace import schema as S


class StructureDiff(Comparison):
    """Every structural change between the two runs (see the module docstring)."""

    def run(self) -> list[Change]:
        steps = StepDiff(self.a.profile, self.b.profile, self.sites, self.changes)
        steps.run()
        self._slots()
        self._groups()
        self._site_facts()
        self._tapes()
        self._kernels()
        self._paths()
        return self.changes

    def aligned_steps(self) -> int:
        """Events both runs have: per step kind (kind, kernel, call site), the smaller count.
        Sets ``kinds_share``: the share of step kinds both runs have."""
        counts_a: dict[Hashable, int] = defaultdict(int)
        counts_b: dict[Hashable, int] = defaultdict(int)
        for token_id, events in enumerate(self.a.profile.token_events.tolist()):
            counts_a[self.a.base(token_id)] += events
        for token_id, events in enumerate(self.b.profile.token_events.tolist()):
            counts_b[self.b.base(token_id)] += events
        self.kinds_share = len(counts_a.keys() & counts_b.keys()) / max(
            len(counts_a.keys() | counts_b.keys()), 1
        )
        return sum(min(n, counts_b.get(key, 0)) for key, n in counts_a.items())

    def _slots(self) -> None:
        """Arguments of matched steps whose memory changed: buffers became distinct or merged,
        the argument touches other arrays, or the step writes other arguments. One change per
        buffer, not per argument."""
        slots_a = _slots_by_base(self.a)
        slots_b = _slots_by_base(self.b)
        grouped: dict[tuple, list] = {}
        for base in [key for key in slots_a if key in slots_b]:
            args_a, args_b = slots_a[base], slots_b[base]
            for arg in sorted(args_a.keys() & args_b.keys()):
                (token_a, slot_a), (token_b, slot_b) = args_a[arg], args_b[arg]
                names_a = [self.group_name(self.a, g) for g in slot_a.groups]
                names_b = [self.group_name(self.b, g) for g in slot_b.groups]
                same_names = {_identity(self.a, g) for g in slot_a.groups} == {
                    _identity(self.b, g) for g in slot_b.groups
                }
                one_per_use = slot_a.buffers == slot_a.occurrences and slot_b.buffers == slot_b.occurrences
                if same_names and (slot_a.buffers == slot_b.buffers or one_per_use):
                    continue  # same arrays, or a fresh buffer per use on both sides (only the count differs)
                # one change per buffer (its name in BEFORE) and direction, however many arguments see it
                trend = (slot_b.buffers > slot_a.buffers) - (slot_b.buffers < slot_a.buffers)
                key = (tuple(names_a[:1]), trend)
                grouped.setdefault(key, []).append((token_a, token_b, arg, slot_a, names_a, names_b, slot_b))
            only_a = sorted(arg for arg in args_a.keys() - args_b.keys() if args_a[arg][1].written)
            only_b = sorted(arg for arg in args_b.keys() - args_a.keys() if args_b[arg][1].written)
            if only_a or only_b:
                token_a, token_b = next(iter(args_a.values()))[0], next(iter(args_b.values()))[0]
                was = ", ".join(self._arg_names(self.a, args_a[arg][1], arg) for arg in only_a)
                now = ", ".join(self._arg_names(self.b, args_b[arg][1], arg) for arg in only_b)
                name = self.step_name(self.b, token_b)
                if was and now:
                    message = f"{name} now writes {now} (was {was})"
                elif now:
                    message = f"{name} now also writes {now}"
                else:
                    message = f"{name} no longer writes {was}"
                self.add(
                    "memory_changed",
                    message,
                    [self.loc(self.a, self.a.profile.tokens[token_a].site)],
                    [self.loc(self.b, self.b.profile.tokens[token_b].site)],
                )
        for (_, trend), entries in grouped.items():
            users = ", ".join(self._user(self.a, entry[0], entry[2]) for entry in entries[:3])
            name_a = (entries[0][4] or [f"`{entries[0][2]}`"])[0]
            now_names = ", ".join(entries[0][5][:2]) or f"`{entries[0][2]}`"
            where = (
                [self.loc(self.a, self.a.profile.tokens[entry[0]].site) for entry in entries[:3]],
                [self.loc(self.b, self.b.profile.tokens[entry[1]].site) for entry in entries[:3]],
            )
            if trend == 0:
                arrays = [name.strip("`") for name in [name_a, *entries[0][5][:2]]]
                self.add(
                    "memory_changed",
                    f"{users} now uses {now_names} instead of {name_a}",
                    *where,
                    subjects=arrays,
                )
                continue
            buffers_a = max(entry[3].buffers for entry in entries)
            buffers_b = max(entry[6].buffers for entry in entries)
            steps = max(entry[3].occurrences for entry in entries)
            kind = "buffers_distinct" if trend > 0 else "buffers_merged"
            shared = "shared" if buffers_a < steps else "distinct"
            self.add(
                kind,
                f"{name_a}: {plural(buffers_a, 'buffer')} {shared} across {steps} steps → {buffers_b} "
                f"{'distinct' if kind == 'buffers_distinct' else 'shared'} ({now_names}; used by {users})",
                *where,
            )

    def _user(self, side: Side, token_id: int, arg: str) -> str:
        token = side.profile.tokens[token_id]
        name = f"`{token.kernel}`" if token.kernel else self.step_name(side, token_id)
        return f"{name} ({arg})" if arg else name

    def _arg_names(self, side: Side, slot: Slot, arg: str) -> str:
        names = [self.group_name(side, g) for g in slot.groups[:2]]
        return f"`{arg}` ({', '.join(names)})" if names and names != [f"`{arg}`"] else f"`{arg}`"

    # ------------------------------------------------------------ arrays
    def _groups(self) -> None:
        groups_b = {self.b.group(key): group for key, group in self.b.profile.groups.items()}
        for key, group_a in self.a.profile.groups.items():
            group_b = groups_b.get(self.a.group(key))
            if group_b is None or group_a.arrays == 0 or group_b.arrays == 0:
                continue
            name = self.group_name(self.a, key)
            where = ([self.loc(self.a, key[0])], [self.loc(self.b, group_b.key[0])])
            for flag in ("requires_grad", "retain_grad"):
                was, now = getattr(group_a, flag), getattr(group_b, flag)
                if (was == 0) != (now == 0) or (was == group_a.arrays) != (now == group_b.arrays):
                    self.add(
                        flag,
                        f"{name}: {flag} {_flag(was, group_a.arrays)} → {_flag(now, group_b.arrays)}",
                        *where,
                        subjects=[key[1]] if key[1] else [],
                    )
            if group_a.arrays != group_b.arrays:
                self.add(
                    "allocations", f"{name}: {group_a.arrays} → {group_b.arrays} arrays allocated", *where
                )

    def _site_facts(self) -> None:
        """Lines both runs run whose fills write other values (a hand seed's weight: ``fill_(1.0)``
        → ``fill_(1.0 / N)``), or whose torch imports stopped (or started) sharing a torch leaf's
        ``.grad`` with Warp (``wp.from_torch(x)`` → ``wp.from_torch(x.detach(), ...)``)."""
        fills_b = {self.b.site(site): (site, values) for site, values in self.b.profile.fills_at.items()}
        for site_a, values_a in self.a.profile.fills_at.items():
            site_b, values_b = fills_b.get(self.a.site(site_a), (-1, values_a))
            if values_a != values_b:
                text = _code(self.loc(self.b, site_b).text or self.loc(self.a, site_a).text)
                self.add(
                    "fill_value",
                    f"`{text}` fills {_values(values_b)} (was {_values(values_a)})",
                    [self.loc(self.a, site_a)],
                    [self.loc(self.b, site_b)],
                )
        leaves_b = {self.b.site(site): (site, n) for site, n in self.b.profile.leaf_imports_at.items()}
        for site_a, n_a in self.a.profile.leaf_imports_at.items():
            site_b, n_b = leaves_b.get(self.a.site(site_a), (-1, n_a))
            if bool(n_a) != bool(n_b):
                text = _code(self.loc(self.b, site_b).text or self.loc(self.a, site_a).text)
                now = "no longer" if n_a else "now"
                self.add(
                    "grad_shared",
                    f"`{text}`: the Warp gradient is {now} the torch leaf's own .grad",
                    [self.loc(self.a, site_a)],
                    [self.loc(self.b, site_b)],
                )

    def _tapes(self) -> None:
        tapes_a = {self.a.site(site) if site >= 0 else site: n for site, n in self.a.profile.tapes.items()}
        tapes_b = {self.b.site(site) if site >= 0 else site: n for site, n in self.b.profile.tapes.items()}
        # which AFTER tape each BEFORE tape's launches went to (matched launches only)
        moved_to: dict[int, set[int]] = defaultdict(set)
        moved_from: dict[int, set[int]] = defaultdict(set)
        # (a launch recorded on several tapes in one run, a helper used with two tapes, says nothing)
        on_a, on_b = _recorded_tapes(self.a), _recorded_tapes(self.b)
        for key, tapes in on_a.items():
            if len(tapes) == 1 and len(on_b.get(key, ())) == 1:
                (tape_a,), (tape_b,) = tapes, on_b[key]
                moved_to[tape_a].add(tape_b)
                moved_from[tape_b].add(tape_a)
        site_a = {self.a.site(s): s for s in self.a.profile.tapes if s >= 0}
        site_b = {self.b.site(s): s for s in self.b.profile.tapes if s >= 0}
        for tape_b, sources in moved_from.items():
            if len(sources) > 1:
                names = " and ".join(
                    self.tape_name(self.a, site_a.get(s, UNKNOWN_TAPE)) for s in sorted(sources)
                )
                self.add(
                    "tapes_merged",
                    f"tapes {names} merged into {self.tape_name(self.b, site_b.get(tape_b, UNKNOWN_TAPE))}",
                    [self.loc(self.a, site_a[s]) for s in sorted(sources) if s in site_a],
                    [self.loc(self.b, site_b[tape_b])] if tape_b in site_b else [],
                )
        for tape_a, targets in moved_to.items():
            if len(targets) > 1:
                names = " and ".join(
                    self.tape_name(self.b, site_b.get(s, UNKNOWN_TAPE)) for s in sorted(targets)
                )
                self.add(
                    "tape_split",
                    f"tape {self.tape_name(self.a, site_a.get(tape_a, UNKNOWN_TAPE))} split into {names}",
                    [self.loc(self.a, site_a[tape_a])] if tape_a in site_a else [],
                    [self.loc(self.b, site_b[s]) for s in sorted(targets) if s in site_b],
                )
        for tape, count in tapes_a.items():
            if tape not in tapes_b and tape in site_a and not moved_to.get(tape):
                self.add("tape_removed", f"tape {self.tape_name(self.a, site_a[tape])} removed ({plural(count, 'tape')})",
                         [self.loc(self.a, site_a[tape])], [])  # fmt: skip
            elif tape in tapes_b and tapes_b[tape] != count:
                self.add(
                    "repeat_count",
                    f"tapes created at {self.place(self.a, site_a.get(tape, tape))}: {count} → {tapes_b[tape]}",
                    [self.loc(self.a, site_a[tape])] if tape in site_a else [],
                    [self.loc(self.b, site_b[tape])] if tape in site_b else [],
                )
        for tape, count in tapes_b.items():
            if tape not in tapes_a and tape in site_b and not moved_from.get(tape):
                self.add("tape_added", f"tape {self.tape_name(self.b, site_b[tape])} added ({plural(count, 'tape')})",
                         [], [self.loc(self.b, site_b[tape])])  # fmt: skip

    # ------------------------------------------------------------ kernels
    def _kernels(self) -> None:
        kernels_b = self.b.profile.kernels
        for key, ka in self.a.profile.kernels.items():
            kb = kernels_b.get(key)
            if kb is None:
                continue
            notes = []
            if ka.enable_backward != kb.enable_backward:
                notes.append(f"enable_backward {ka.enable_backward} → {kb.enable_backward}")
            if ka.custom_grad != kb.custom_grad:
                notes.append(f"custom adjoints {_list(ka.custom_grad)} → {_list(kb.custom_grad)}")
            if ka.custom_replay != kb.custom_replay:
                notes.append(f"replay functions {_list(ka.custom_replay)} → {_list(kb.custom_replay)}")
            if ka.in_place != kb.in_place:
                notes.append(
                    f"arguments read and stored in place {_list(ka.in_place)} → {_list(kb.in_place)}"
                )
            if ka.signature != kb.signature:
                notes.append(f"arguments ({', '.join(ka.signature)}) → ({', '.join(kb.signature)})")
            where = (
                [Location(file=ka.file, line=ka.line, function=key)],
                [Location(file=kb.file, line=kb.line, function=key)],
            )
            if notes:
                self.add("kernel_changed", f"kernel `{key}`: " + "; ".join(notes), *where, subjects=[key])
            elif ka.source != kb.source:
                self.add("kernel_source", f"kernel `{key}`: source changed", *where, subjects=[key])

    # ------------------------------------------------------------ gradient paths
    def _paths(self) -> None:
        paths_a = {(self.a.group(p), self.a.group(loss)) for p, loss in self.a.profile.grad_paths}
        paths_b = {(self.b.group(p), self.b.group(loss)) for p, loss in self.b.profile.grad_paths}
        names_a = {(self.a.group(p), self.a.group(loss)): (p, loss) for p, loss in self.a.profile.grad_paths}
        names_b = {(self.b.group(p), self.b.group(loss)): (p, loss) for p, loss in self.b.profile.grad_paths}
        # only losses both runs differentiate (a renamed loss is a backward_loss change) and
        # parameters both runs have (a renamed array is an allocation change, not a lost path)
        losses = _losses(self.a) & _losses(self.b)
        groups_a = {self.a.group(key) for key, g in self.a.profile.groups.items() if g.arrays}
        groups_b = {self.b.group(key) for key, g in self.b.profile.groups.items() if g.arrays}
        both = groups_a & groups_b
        for pair in sorted(paths_a - paths_b, key=str):
            if pair[1] in losses and pair[0] in both:
                param, loss = names_a[pair]
                self.add(
                    "grad_path_lost",
                    f"gradient path {self.group_name(self.a, param)} → {self.group_name(self.a, loss)} lost",
                    [self.loc(self.a, param[0])],
                    [],
                    subjects=[param[1]] if param[1] else [],
                )
        for pair in sorted(paths_b - paths_a, key=str):
            if pair[1] in losses and pair[0] in both:
                param, loss = names_b[pair]
                self.add(
                    "grad_path_gained",
                    f"gradient path {self.group_name(self.b, param)} → {self.group_name(self.b, loss)} gained",
                    [],
                    [self.loc(self.b, param[0])],
                    subjects=[param[1]] if param[1] else [],
                )


def _recorded_tapes(side: Side) -> dict[Hashable, set[int]]:
    """Per launch (base key), the tapes (canonical creation sites) it was recorded on."""
    tapes: dict[Hashable, set[int]] = defaultdict(set)
    for token_id, token in enumerate(side.profile.tokens):
        tape = side.attrs(token_id)[0]
        if token.recorded and token.kind == S.LAUNCH and tape != UNTAPED:
            tapes[side.base(token_id)].add(tape)
    return tapes


def _losses(side: Side) -> set[GroupKey | None]:
    """The arrays the run's backward calls differentiate (canonical group keys)."""
    return {side.group(t.loss) for t in side.profile.tokens if t.kind == S.BACKWARD_BEGIN and t.loss}


def _identity(side: Side, key: GroupKey) -> str:
    """A group's name without its place: the label, else the allocation line's code."""
    if key[1]:
        return key[1]
    site = side.profile.sites.get(key[0])
    return site.code if site else ""


def _slots_by_base(side: Side) -> dict[Hashable, dict[str, tuple[int, Slot]]]:
    table: dict[Hashable, dict[str, tuple[int, Slot]]] = defaultdict(dict)
    for (token_id, arg), slot in side.profile.slots.items():
        table[side.base(token_id)].setdefault(arg, (token_id, slot))
    return table


def _flag(count: int, total: int) -> str:
    if count == 0:
        return "False"
    if count == total:
        return "True"
    return f"True for {count} of {total}"


def _list(values: tuple[str, ...]) -> str:
    return "(" + ", ".join(values) + ")" if values else "none"


def _values(values: tuple[float, ...]) -> str:
    return ", ".join(f"{v:g}" for v in values)


def _code(text: str) -> str:
    """A source line without its trailing comment."""
    return text.split("  #")[0].strip()
