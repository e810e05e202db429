"""Two runs seen through one site map, and the vocabulary changes are written in.

:class:`Side` gives each program step of one run a key that means the same in both
runs (kind, kernel, canonical call site) and positions in its once-expanded step
sequence (every loop body once); :class:`Comparison` is the base of the comparisons,
holding both sides and naming steps, tapes and arrays in the user's terms.
"""

from __future__ import annotations

import bisect
import os
from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass
from functools import cached_property

from warptrace.analysis.diff.align import Item, Loop, SiteMap
from warptrace.analysis.diff.changes import Change
from warptrace.analysis.diff.profile import UNKNOWN_TAPE, UNTAPED, GroupKey, Profile
from warptrace.analysis.findings import Location
from warptrace.trace import schema as S


@dataclass
class Entry:
    """One step in an expanded region: token, how many times it ran, where (once-expanded position)."""

    token: int
    times: int
    pos: int
    loop: tuple[int, int]  # once-expanded range of the innermost loop body holding it, or (-1, -1)


class Side:
    """One run seen through the site map: canonical keys and once-expanded positions."""

    def __init__(self, profile: Profile, canon: dict[int, int], name: str) -> None:
        self.profile = profile
        self.canon = canon
        self.name = name
        self._loop_keys: dict[int, Hashable] = {}
        self._widths: dict[int, int] = {}
        self.flat: list[int] = []  # token ids, every loop body once
        self._positions: dict[Hashable, list[int]] | None = None
        self._expand(profile.steps)

    def _expand(self, items: list[Item] | tuple[Item, ...]) -> None:
        for item in items:
            if isinstance(item, Loop):
                self._expand(item.body)
            else:
                self.flat.append(item)

    def site(self, site_id: int) -> int:
        return self.canon.get(site_id, -10 - site_id)

    def base(self, token_id: int) -> Hashable:
        token = self.profile.tokens[token_id]
        return (token.kind, token.kernel, self.site(token.site))

    def attrs(self, token_id: int) -> tuple[int, bool, GroupKey | None]:
        token = self.profile.tokens[token_id]
        tape = token.tape if token.tape in (UNTAPED, UNKNOWN_TAPE) else self.site(token.tape)
        return (tape, token.recorded, self.group(token.loss))

    def group(self, key: GroupKey | None) -> GroupKey | None:
        return None if key is None else (self.site(key[0]), key[1])

    def key(self, item: Item) -> Hashable:
        if not isinstance(item, Loop):
            return self.base(item)
        cached = self._loop_keys.get(id(item))
        if cached is None:
            cached = self._loop_keys[id(item)] = ("loop", tuple(self.key(i) for i in item.body))
        return cached

    def width(self, item: Item) -> int:
        """Positions the item takes in the once-expanded sequence."""
        if not isinstance(item, Loop):
            return 1
        cached = self._widths.get(id(item))
        if cached is None:
            cached = self._widths[id(item)] = sum(self.width(i) for i in item.body)
        return cached

    def positions(self, key: Hashable) -> list[int]:
        """Once-expanded positions of the steps with this base key."""
        if self._positions is None:
            self._positions = defaultdict(list)
            for pos, token in enumerate(self.flat):
                self._positions[self.base(token)].append(pos)
        return self._positions.get(key, [])

    @cached_property
    def anchor_positions(self) -> list[int]:
        """Sorted once-expanded positions of the backward calls."""
        return [
            pos for pos, token in enumerate(self.flat) if self.profile.tokens[token].kind == S.BACKWARD_BEGIN
        ]

    def anchors_between(self, lo: int, hi: int) -> list[int]:
        """Positions of backward calls in [lo, hi]."""
        found = self.anchor_positions
        return found[bisect.bisect_left(found, lo) : bisect.bisect_right(found, hi)]

    def anchors(self, entry: Entry) -> tuple[Hashable | None, Hashable | None]:
        """Base keys of the backward calls just before and just after the entry (wrapping around
        its loop body, the way the loop runs)."""
        lo, hi = entry.loop if entry.loop[0] >= 0 else (0, len(self.flat))
        earlier = self.anchors_between(lo, entry.pos - 1)
        later = self.anchors_between(entry.pos + 1, hi - 1)
        if entry.loop[0] >= 0:  # the loop comes round: the body's start follows its end
            earlier, later = earlier or later, later or earlier
        before = self.base(self.flat[earlier[-1]]) if earlier else None
        after = self.base(self.flat[later[0]]) if later else None
        return before, after


class Comparison:
    """Both sides, the site map, and the changes found so far."""

    def __init__(
        self, before: Profile, after: Profile, sites: SiteMap, changes: list[Change] | None = None
    ) -> None:
        self.sites = sites
        self.a = Side(before, sites.canon_a, "a")
        self.b = Side(after, sites.canon_b, "b")
        self.changes: list[Change] = [] if changes is None else changes

    def loc(self, side: Side, site_id: int) -> Location:
        site = side.profile.sites.get(site_id)
        if site is None:
            return Location(file="<unknown>", line=0)
        return Location(file=site.file, line=site.line, text=site.text, function=site.function)

    def place(self, side: Side, site_id: int) -> str:
        site = side.profile.sites.get(site_id)
        return f"{os.path.basename(site.file)}:{site.line}" if site else "?"

    def step_name(self, side: Side, token_id: int) -> str:
        token = side.profile.tokens[token_id]
        if token.kind in (S.LAUNCH, S.CMD_LAUNCH):
            return f"launch of `{token.kernel}`"
        site = side.profile.sites.get(token.site)
        text = short(site.text) if site else token.kind
        return f"`{text}`"

    def anchor_name(self, side: Side, key: Hashable) -> str:
        site_id = site_of_key(side, key)
        return f"`{short(side.profile.sites[site_id].text)}`" if site_id in side.profile.sites else "backward"

    def tape_name(self, side: Side, tape_site: int) -> str:
        if tape_site == UNTAPED:
            return "no tape"
        if tape_site == UNKNOWN_TAPE:
            return "a tape"
        site = side.profile.sites.get(tape_site)
        label = site.label if site and site.label else "tape"
        return f"`{label}` ({self.place(side, tape_site)})"

    def group_name(self, side: Side, key: GroupKey | None) -> str:
        if key is None:
            return "?"
        if key[1]:
            return f"`{key[1]}`"
        site = side.profile.sites.get(key[0])
        if site is None:
            return "an array"
        return f"`{short(site.text, 40)}` ({self.place(side, key[0])})"

    def add(
        self,
        kind: str,
        message: str,
        before: list[Location],
        after: list[Location],
        times: int = 1,
        subjects: list[str] | None = None,
    ) -> None:
        self.changes.append(
            Change(
                kind=kind, message=message, before=before, after=after, times=times, subjects=subjects or []
            )
        )

    # ------------------------------------------------------------ steps


def site_of_key(side: Side, key: Hashable) -> int:
    canon = key[2] if isinstance(key, tuple) and len(key) == 3 else None
    for site_id, canon_id in side.canon.items():
        if canon_id == canon:
            return site_id
    return -1


def short(text: str, width: int = 60) -> str:
    text = text.split("#")[0].strip() if "#" in text else text.strip()
    return text if len(text) <= width else text[: width - 1] + "…"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
