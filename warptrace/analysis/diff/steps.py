"""Program steps of two runs aligned: added, removed, moved, moved onto or off a tape.

The folded step sequences (``align.fold``) are aligned on (kind, kernel, call site);
equal loops are compared body to body, so a change inside a 200-step loop is one
change "× 200"; regions that differ are expanded and aligned step by step. A step
found only in BEFORE and the same step found only in AFTER (anywhere) is a move, said
relative to the step it jumped over (a backward call when it crossed one). A matched
step whose tape or recorded flag changed moved onto or off a tape; a matched backward
call whose loss changed differentiates something else.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Hashable

from warptrace.analysis.diff.align import Item, Loop
from warptrace.analysis.diff.profile import UNTAPED
from warptrace.analysis.diff.sides import Comparison, Entry, Side, site_of_key
from warptrace.trace import schema as S

# longest expanded region aligned step by step, and longest sequence of folded items aligned
# as a sequence; beyond them, steps are compared as counts per step kind (linear time)
REGION_LIMIT = 2000
ALIGN_LIMIT = 2000

_NOUN = {
    S.LAUNCH: "launch",
    S.CMD_LAUNCH: "launch",
    S.COPY: "copy",
    S.MEMSET: "memset",
    S.NATIVE: "native",
    S.VALUE_READ: "read",
    S.TAPE_ZERO: "tape_zero",
    S.TAPE_RESET: "tape_reset",
    S.BACKWARD_BEGIN: "backward",
    S.RECORD_FUNC: "record_func",
}


# how far from a moved step to look for the step it jumped over
_CROSS_WINDOW = 8
_WRITES = frozenset({S.LAUNCH, S.CMD_LAUNCH, S.COPY, S.MEMSET, S.NATIVE})


class StepDiff(Comparison):
    """Aligns the step sequences."""

    def run(self) -> None:
        self._removed: list[Entry] = []
        self._added: list[Entry] = []
        self._align(list(self.a.profile.steps), list(self.b.profile.steps), 1, 0, 0, (-1, -1), (-1, -1))
        self._moves()

    def _align(
        self,
        items_a: list[Item],
        items_b: list[Item],
        times: int,
        pos_a: int,
        pos_b: int,
        loop_a: tuple[int, int],
        loop_b: tuple[int, int],
    ) -> None:
        starts_a = _starts(self.a, items_a, pos_a)
        starts_b = _starts(self.b, items_b, pos_b)
        if max(len(items_a), len(items_b)) > ALIGN_LIMIT:
            self._coarse(items_a, items_b, times, pos_a, pos_b)
            return
        keys_a = [self.a.key(i) for i in items_a]
        keys_b = [self.b.key(i) for i in items_b]
        matcher = difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                for k in range(i2 - i1):
                    self._same(
                        items_a[i1 + k],
                        items_b[j1 + k],
                        times,
                        starts_a[i1 + k],
                        starts_b[j1 + k],
                        loop_a,
                        loop_b,
                    )
                continue
            if starts_a[i2] - starts_a[i1] > REGION_LIMIT or starts_b[j2] - starts_b[j1] > REGION_LIMIT:
                self._coarse(items_a[i1:i2], items_b[j1:j2], times, starts_a[i1], starts_b[j1])
                continue
            region_a = self._expand(self.a, items_a[i1:i2], times, starts_a[i1], loop_a)
            region_b = self._expand(self.b, items_b[j1:j2], times, starts_b[j1], loop_b)
            self._region(region_a, region_b)

    def _same(
        self,
        item_a: Item,
        item_b: Item,
        times: int,
        pos_a: int,
        pos_b: int,
        loop_a: tuple[int, int],
        loop_b: tuple[int, int],
    ) -> None:
        if isinstance(item_a, Loop) and isinstance(item_b, Loop):
            if item_a.count != item_b.count:
                first = item_a.body[0]
                token = first if not isinstance(first, Loop) else self.a.flat[pos_a]
                self.add(
                    "repeat_count",
                    f"loop body of {item_a.width} steps starting with {self.step_name(self.a, token)}: "
                    f"{item_a.count} → {item_b.count} steps",
                    [self.loc(self.a, self.a.profile.tokens[token].site)],
                    [],
                    times,
                )
            range_a = (pos_a, pos_a + self.a.width(item_a))
            range_b = (pos_b, pos_b + self.b.width(item_b))
            self._align(
                list(item_a.body), list(item_b.body), times * min(item_a.count, item_b.count),
                pos_a, pos_b, range_a, range_b,
            )  # fmt: skip
            return
        assert not isinstance(item_a, Loop) and not isinstance(item_b, Loop)
        self._compare_token(item_a, item_b, times)

    def _compare_token(self, token_a: int, token_b: int, times: int) -> None:
        tape_a, rec_a, loss_a = self.a.attrs(token_a)
        tape_b, rec_b, loss_b = self.b.attrs(token_b)
        a, b = self.a.profile.tokens[token_a], self.b.profile.tokens[token_b]
        where = ([self.loc(self.a, a.site)], [self.loc(self.b, b.site)])
        name = self.step_name(self.b, token_b)
        on_a, on_b = rec_a and tape_a != UNTAPED, rec_b and tape_b != UNTAPED
        if on_a and not on_b:
            self.add(
                "moved_off_tape", f"{name} moved off the tape {self.tape_name(self.a, a.tape)}", *where, times
            )
        elif on_b and not on_a:
            self.add(
                "moved_onto_tape",
                f"{name} moved onto the tape {self.tape_name(self.b, b.tape)}",
                *where,
                times,
            )
        elif on_a and on_b and tape_a != tape_b:
            self.add(
                "moved_between_tapes",
                f"{name} moved from tape {self.tape_name(self.a, a.tape)} to {self.tape_name(self.b, b.tape)}",
                *where,
                times,
            )
        if a.kind == S.BACKWARD_BEGIN and loss_a != loss_b:
            self.add(
                "backward_loss",
                f"{name} now differentiates {self.group_name(self.b, b.loss) if b.loss else 'hand-seeded gradients'}"
                f" (was {self.group_name(self.a, a.loss) if a.loss else 'hand-seeded gradients'})",
                *where,
                times,
            )

    def _expand(
        self, side: Side, items: list[Item], times: int, pos: int, loop: tuple[int, int]
    ) -> list[Entry]:
        out: list[Entry] = []

        def walk(seq: tuple[Item, ...] | list[Item], mult: int, at: int, rng: tuple[int, int]) -> int:
            for item in seq:
                if isinstance(item, Loop):
                    width = side.width(item)
                    walk(item.body, mult * item.count, at, (at, at + width))
                    at += width
                else:
                    out.append(Entry(item, mult, at, rng))
                    at += 1
            return at

        walk(items, times, pos, loop)
        return out

    def _region(self, region_a: list[Entry], region_b: list[Entry]) -> None:
        """Align two expanded regions step by step. A step only one side has is added or removed
        (or moved, when the other side has it elsewhere). A step both sides have but folded
        differently (a loop body regrouped, an optimizer step now every 4th iteration) is
        compared by how often it runs in the region; only an occurrence that runs as often
        on both sides but sits elsewhere is a move."""
        keys_a = [self.a.base(e.token) for e in region_a]
        keys_b = [self.b.base(e.token) for e in region_b]
        unmatched_a: list[Entry] = []
        unmatched_b: list[Entry] = []
        matcher = difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag != "equal":
                unmatched_a.extend(region_a[i1:i2])
                unmatched_b.extend(region_b[j1:j2])
                continue
            for ea, eb in zip(region_a[i1:i2], region_b[j1:j2]):
                self._compare_token(ea.token, eb.token, min(ea.times, eb.times))
        both = set(keys_a) & set(keys_b)
        partners: dict[Hashable, list[Entry]] = defaultdict(list)
        for eb in unmatched_b:
            key = self.b.base(eb.token)
            if key in both:
                partners[key].append(eb)
            else:
                self._added.append(eb)
        for ea in unmatched_a:
            key = self.a.base(ea.token)
            if key not in both:
                self._removed.append(ea)
                continue
            same = next((eb for eb in partners[key] if eb.times == ea.times), None)
            if same is not None:
                partners[key].remove(same)
                self._removed.append(ea)
                self._added.append(same)
        totals_a: dict[Hashable, int] = defaultdict(int)
        totals_b: dict[Hashable, int] = defaultdict(int)
        first_a: dict[Hashable, Entry] = {}
        first_b: dict[Hashable, Entry] = {}
        for key, entry in zip(keys_a, region_a):
            totals_a[key] += entry.times
            first_a.setdefault(key, entry)
        for key, entry in zip(keys_b, region_b):
            totals_b[key] += entry.times
            first_b.setdefault(key, entry)
        self._repeats(totals_a, totals_b, first_a, first_b)

    def _repeats(
        self,
        totals_a: dict[Hashable, int],
        totals_b: dict[Hashable, int],
        first_a: dict[Hashable, Entry],
        first_b: dict[Hashable, Entry],
    ) -> None:
        """Steps both sides have that run a different number of times; steps whose counts
        changed the same way (a loop body that runs more often) are one change."""
        changed: dict[tuple[int, int], list[Hashable]] = defaultdict(list)
        for key in first_a:
            if key in first_b and totals_a[key] != totals_b[key]:
                changed[(totals_a[key], totals_b[key])].append(key)
        for (total_a, total_b), keys in changed.items():
            names = [self.step_name(self.b, first_b[key].token) for key in keys]
            listed = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            self.add(
                "repeat_count",
                f"{listed} {'runs' if len(names) == 1 else 'run'} {total_a} → {total_b} times",
                [self.loc(self.a, self.a.profile.tokens[first_a[key].token].site) for key in keys[:3]],
                [self.loc(self.b, self.b.profile.tokens[first_b[key].token].site) for key in keys[:3]],
            )

    def _coarse(self, items_a: list[Item], items_b: list[Item], times: int, pos_a: int, pos_b: int) -> None:
        """Two long stretches that do not fold (unrelated programs, irregular runs): compared as
        counts per step kind, in linear time. A step kind only one side has is added or removed
        once (with its total count); no moves are looked for inside."""
        totals_a, first_a = self._totals(self.a, items_a, times, pos_a)
        totals_b, first_b = self._totals(self.b, items_b, times, pos_b)
        for key, entry in first_a.items():
            if key not in first_b:
                self._removed.append(Entry(entry.token, totals_a[key], entry.pos, entry.loop))
        for key, entry in first_b.items():
            if key not in first_a:
                self._added.append(Entry(entry.token, totals_b[key], entry.pos, entry.loop))
        self._repeats(totals_a, totals_b, first_a, first_b)

    def _totals(
        self, side: Side, items: list[Item], times: int, pos: int
    ) -> tuple[dict[Hashable, int], dict[Hashable, Entry]]:
        """Events per step kind in ``items`` and the first occurrence of each."""
        totals: dict[Hashable, int] = defaultdict(int)
        first: dict[Hashable, Entry] = {}
        stack: list[tuple[tuple[Item, ...] | list[Item], int, int, tuple[int, int]]] = [
            (items, times, pos, (-1, -1))
        ]
        while stack:
            seq, mult, at, rng = stack.pop()
            for item in seq:
                if isinstance(item, Loop):
                    width = side.width(item)
                    stack.append((item.body, mult * item.count, at, (at, at + width)))
                    at += width
                    continue
                key = side.base(item)
                totals[key] += mult
                if key not in first or at < first[key].pos:
                    first[key] = Entry(item, mult, at, rng)
                at += 1
        return totals, first

    def _moves(self) -> None:
        """Pair steps removed in one place with the same step added in another: moves."""
        waiting: dict[Hashable, list[Entry]] = defaultdict(list)
        for entry in self._removed:
            waiting[self.a.base(entry.token)].append(entry)
        added_only: dict[Hashable, list[Entry]] = defaultdict(list)
        for entry in self._added:
            key = self.b.base(entry.token)
            if waiting.get(key):
                self._moved(waiting[key].pop(0), entry)
            else:
                added_only[key].append(entry)
        for entries in waiting.values():
            if entries:
                self._added_or_removed(self.a, entries, "removed")
        for entries in added_only.values():
            self._added_or_removed(self.b, entries, "added")

    def _moved(self, ea: Entry, eb: Entry) -> None:
        token = self.b.profile.tokens[eb.token]
        noun = _NOUN.get(token.kind, "launch")
        name = self.step_name(self.b, eb.token)
        before = [self.loc(self.a, self.a.profile.tokens[ea.token].site)]
        after = [self.loc(self.b, token.site)]
        crossed = self._crossed(ea, eb)
        if crossed is None:
            how = "it runs at another point of the program"
        else:
            direction, pos_a, pos_b = crossed
            other = self.step_name(self.b, self.b.flat[pos_b])
            how = f"now {direction} {other} (was {'before' if direction == 'after' else 'after'} it)"
            before.append(self.loc(self.a, self.a.profile.tokens[self.a.flat[pos_a]].site))
            after.append(self.loc(self.b, self.b.profile.tokens[self.b.flat[pos_b]].site))
        self.add(f"{noun}_moved", f"{name} moved: {how}", before, after, eb.times)
        self._compare_token(ea.token, eb.token, eb.times)

    def _crossed(self, ea: Entry, eb: Entry) -> tuple[str, int, int] | None:
        """The step the moved one jumped over: ("after" | "before", its position in BEFORE and AFTER).
        A backward call when one was crossed, else the nearest step that writes memory (a launch,
        copy or memset), else the nearest neighbour."""
        found: list[tuple[str, int, int]] = []
        for step, direction in ((-1, "after"), (1, "before")):
            for distance in range(1, _CROSS_WINDOW + 1):
                pos_b = eb.pos + step * distance
                if not 0 <= pos_b < len(self.b.flat):
                    break
                positions = self.a.positions(self.b.base(self.b.flat[pos_b]))
                jumped = [p for p in positions if (p > ea.pos if direction == "after" else p < ea.pos)]
                if not jumped:
                    break  # this neighbour stayed on the same side: nothing further was jumped over
                pos_a = min(jumped, key=lambda p: abs(p - ea.pos))
                lo, hi = sorted((ea.pos, pos_a))
                backward = [p for p in self.a.anchors_between(lo, hi) if p != ea.pos]
                if backward:
                    target = backward[0] if direction == "after" else backward[-1]
                    matches = self.b.positions(self.a.base(self.a.flat[target]))
                    if matches:
                        return direction, target, min(matches, key=lambda p: abs(p - eb.pos))
                found.append((direction, pos_a, pos_b))
        for direction, pos_a, pos_b in found:
            if self.b.profile.tokens[self.b.flat[pos_b]].kind in _WRITES:
                return direction, pos_a, pos_b
        return found[0] if found else None

    def _added_or_removed(self, side: Side, entries: list[Entry], what: str) -> None:
        token = side.profile.tokens[entries[0].token]
        noun = _NOUN.get(token.kind, "launch")
        times = sum(e.times for e in entries)
        before_key, after_key = side.anchors(entries[0])
        context = ""
        if token.kind in (S.TAPE_ZERO, S.TAPE_RESET, S.COPY, S.MEMSET, S.LAUNCH) and after_key is not None:
            context = f" before {self.anchor_name(side, after_key)}"
        elif token.kind in (S.TAPE_ZERO, S.TAPE_RESET) and before_key is not None:
            context = f" after {self.anchor_name(side, before_key)}"
        if token.kind in (S.LAUNCH, S.CMD_LAUNCH, S.COPY, S.MEMSET) and token.recorded:
            context += f" on the tape {self.tape_name(side, token.tape)}"
        repeat = f" (× {times})" if times > 1 else ""
        message = f"{self.step_name(side, entries[0].token)} {what}{context}{repeat} at {self.place(side, token.site)}"
        loc = [self.loc(side, token.site)]
        anchor = (
            after_key
            if context.startswith(" before")
            else before_key
            if context.startswith(" after")
            else None
        )
        if anchor is not None and site_of_key(side, anchor) >= 0:
            loc.append(self.loc(side, site_of_key(side, anchor)))
        self.add(
            f"{noun}_{what}",
            message,
            loc if what == "removed" else [],
            loc if what == "added" else [],
            times,
            subjects=list(token.subjects),
        )

    # ------------------------------------------------------------ buffers per argument


def _starts(side: Side, items: list[Item], pos: int) -> list[int]:
    """Once-expanded start position of each item, and one past the last (a region may start there)."""
    starts = []
    for item in items:
        starts.append(pos)
        pos += side.width(item)
    starts.append(pos)
    return starts
