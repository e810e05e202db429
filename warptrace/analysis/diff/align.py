"""Aligning two runs by role, never by address: files, call sites, and repeated steps.

- **Files**: the same path, else the same file name, else the file sharing the most
  call-site lines and kernels (a fixed twin saved as ``train_fixed.py`` still pairs
  with ``train.py``).
- **Call sites** are matched on the source text of the line (comments and spacing
  ignored) in the same file and function, the n-th occurrence of a text with the n-th;
  then launch lines that launch the same kernels from the same function; then lines of
  the same function whose text is similar enough (an edited argument list). Lines
  inserted above a site move its line number, not its identity.
- **Folding**: a run of launches is compressed into loops, innermost first
  (``fold``): a 200-step loop of 4 launches becomes one item ``Loop(body, 200)``, and
  a training loop around it one more level, so a change inside a loop body is seen (and
  reported) once.
"""

from __future__ import annotations

import difflib
import os
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Union

import numpy as np

# functions Python gives comprehensions their own frame for (3.11 and older): not a user function
COMPREHENSIONS = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})
# the longest loop body (in items, after inner loops are folded) that ``fold`` looks for
MAX_PERIOD = 96
# similarity of two edited lines of the same function for them to count as one call site
_SIMILAR = 0.6
_SIMILAR_SAME_LABEL = 0.3
# share of its call-site lines and kernels a renamed file must have in common with the other run's
_SAME_FILE_SHARE = 0.3


@dataclass(frozen=True)
class Site:
    """One interned user call site of a trace."""

    site_id: int
    file: str
    line: int
    function: str
    text: str
    label: str

    @property
    def code(self) -> str:
        return normalize_text(self.text)

    @property
    def scope(self) -> str:
        return "<comp>" if self.function in COMPREHENSIONS else self.function


def normalize_text(text: str) -> str:
    """A source line without its trailing comment and with runs of spaces collapsed."""
    quote = ""
    escaped = False
    end = len(text)
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#":
            end = index
            break
    return " ".join(text[:end].split())


def _scopes_compatible(a: Site, b: Site) -> bool:
    return a.scope == b.scope or "<comp>" in (a.scope, b.scope)


# --------------------------------------------------------------------------- files and sites


@dataclass
class SiteMap:
    """Call sites of BEFORE and AFTER put into one id space.

    ``canon_a[site]`` / ``canon_b[site]`` give the canonical id of a site of either run;
    a matched pair shares one id, an unmatched site gets its own. ``file_b_to_a`` maps
    AFTER's files onto BEFORE's (unmapped files keep their own path)."""

    canon_a: dict[int, int] = field(default_factory=dict)
    canon_b: dict[int, int] = field(default_factory=dict)
    file_b_to_a: dict[str, str] = field(default_factory=dict)
    pairs: list[tuple[Site, Site]] = field(default_factory=list)
    n_a: int = 0
    n_b: int = 0

    def canon_file(self, path: str, side: str) -> str:
        return self.file_b_to_a.get(path, path) if side == "b" else path

    @property
    def matched(self) -> int:
        return len(self.pairs)

    def line_shift(self, file_a: str, line_a: int) -> int:
        """How far AFTER moved line ``line_a`` of BEFORE's ``file_a``: the shift of the nearest
        matched site at or above it (0 when none)."""
        best: tuple[int, int] | None = None
        for site_a, site_b in self.pairs:
            if site_a.file != file_a or site_a.line > line_a:
                continue
            if best is None or site_a.line > best[0]:
                best = (site_a.line, site_b.line - site_a.line)
        return best[1] if best else 0


def match_files(
    sites_a: Iterable[Site],
    sites_b: Iterable[Site],
    kernels_a: Mapping[str, str],
    kernels_b: Mapping[str, str],
) -> dict[str, str]:
    """AFTER file -> BEFORE file: same path, else same name, else most shared lines and kernels."""
    keys_a: dict[str, set[tuple[str, str]]] = defaultdict(set)
    keys_b: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for site in sites_a:
        keys_a[site.file].add((site.scope, site.code))
    for site in sites_b:
        keys_b[site.file].add((site.scope, site.code))
    for key, path in kernels_a.items():
        keys_a[path].add(("<kernel>", key))
    for key, path in kernels_b.items():
        keys_b[path].add(("<kernel>", key))
    keys_a.pop("", None)
    keys_b.pop("", None)
    scored = []
    for file_b, shared_b in keys_b.items():
        for file_a, shared_a in keys_a.items():
            score = len(shared_a & shared_b)
            if file_a == file_b:
                score += 1_000_000
            elif os.path.basename(file_a) == os.path.basename(file_b):
                score += 1_000
            if score > 0:
                scored.append((-score, file_b, file_a))
    mapping: dict[str, str] = {}
    taken: set[str] = set()
    for negative, file_b, file_a in sorted(scored):
        score = -negative
        if score < 1_000 and score < max(2, _SAME_FILE_SHARE * min(len(keys_a[file_a]), len(keys_b[file_b]))):
            continue  # a few common lines (`tape = wp.Tape()`) do not make two files one
        if file_b not in mapping and file_a not in taken:
            mapping[file_b] = file_a
            taken.add(file_a)
    # the one file left on each side (a single script saved under a new name) pairs on any common line
    rest_a = [f for f in keys_a if f not in taken]
    rest_b = [f for f in keys_b if f not in mapping]
    if len(rest_a) == 1 and len(rest_b) == 1 and keys_a[rest_a[0]] & keys_b[rest_b[0]]:
        mapping[rest_b[0]] = rest_a[0]
    return mapping


def match_sites(
    sites_a: Mapping[int, Site],
    sites_b: Mapping[int, Site],
    kernels_at_a: Mapping[int, frozenset[str]],
    kernels_at_b: Mapping[int, frozenset[str]],
    file_b_to_a: Mapping[str, str],
) -> SiteMap:
    """Pair call sites: same text in the same file and function (n-th with n-th), then launch
    lines of the same kernels, then similar lines of the same function."""
    result = SiteMap(file_b_to_a=dict(file_b_to_a), n_a=len(sites_a), n_b=len(sites_b))

    def file_of_b(site: Site) -> str:
        return file_b_to_a.get(site.file, site.file)

    pairs: dict[int, int] = {}  # site_b -> site_a
    # 1. identical code text (and kernels launched), in line order
    # (the kernels a line launches are part of its identity: `wp.launch(kernel, ...)` in a helper)
    empty: frozenset[str] = frozenset()
    by_text_a: dict[tuple[str, str, str, frozenset[str]], list[Site]] = defaultdict(list)
    for site in sorted(sites_a.values(), key=lambda s: (s.file, s.line, s.site_id)):
        by_text_a[(site.file, site.scope, site.code, kernels_at_a.get(site.site_id, empty))].append(site)
    by_text_b: dict[tuple[str, str, str, frozenset[str]], list[Site]] = defaultdict(list)
    for site in sorted(sites_b.values(), key=lambda s: (s.file, s.line, s.site_id)):
        key = (file_of_b(site), site.scope, site.code, kernels_at_b.get(site.site_id, empty))
        by_text_b[key].append(site)
    for key, group_b in by_text_b.items():
        for site_a, site_b in zip(by_text_a.get(key, ()), group_b):
            pairs[site_b.site_id] = site_a.site_id
    used_a = set(pairs.values())

    # 2. launch lines of the same kernels in the same file and function, in line order
    def launch_key(site: Site, file: str, kernels: frozenset[str]) -> tuple[str, str, frozenset[str]]:
        return (file, site.scope, kernels)

    rest_a: dict[tuple[str, str, frozenset[str]], list[Site]] = defaultdict(list)
    for site in sorted(sites_a.values(), key=lambda s: (s.line, s.site_id)):
        kernels = kernels_at_a.get(site.site_id)
        if kernels and site.site_id not in used_a:
            rest_a[launch_key(site, site.file, kernels)].append(site)
    for site in sorted(sites_b.values(), key=lambda s: (s.line, s.site_id)):
        kernels = kernels_at_b.get(site.site_id)
        if not kernels or site.site_id in pairs:
            continue
        candidates = rest_a.get(launch_key(site, file_of_b(site), kernels))
        if candidates:
            site_a = candidates.pop(0)
            pairs[site.site_id] = site_a.site_id
            used_a.add(site_a.site_id)

    # 3. similar text in the same file and a compatible function, best pairs first
    free_a = [s for s in sites_a.values() if s.site_id not in used_a]
    free_b = [s for s in sites_b.values() if s.site_id not in pairs]
    if free_a and free_b and len(free_a) * len(free_b) <= 250_000:
        scored = []
        for site_b in free_b:
            matcher = difflib.SequenceMatcher(None, "", site_b.code, autojunk=False)
            for site_a in free_a:
                if site_a.file != file_of_b(site_b) or not _scopes_compatible(site_a, site_b):
                    continue
                if kernels_at_a.get(site_a.site_id, frozenset()) != kernels_at_b.get(
                    site_b.site_id, frozenset()
                ):
                    continue
                matcher.set_seq1(site_a.code)
                if matcher.real_quick_ratio() < _SIMILAR_SAME_LABEL:
                    continue
                ratio = matcher.ratio()
                same_label = bool(site_a.label) and site_a.label == site_b.label
                if ratio >= _SIMILAR or (same_label and ratio >= _SIMILAR_SAME_LABEL):
                    scored.append((-ratio - same_label, site_b.site_id, site_a.site_id))
        for _, b_id, a_id in sorted(scored):
            if b_id not in pairs and a_id not in used_a:
                pairs[b_id] = a_id
                used_a.add(a_id)

    result.canon_a = {site_id: site_id for site_id in sites_a}
    offset = max(sites_a, default=-1) + 1
    for site_id in sites_b:
        result.canon_b[site_id] = pairs.get(site_id, offset + site_id)
    result.pairs = [(sites_a[a], sites_b[b]) for b, a in sorted(pairs.items())]
    return result


# --------------------------------------------------------------------------- folding


@dataclass(frozen=True)
class Loop:
    """``body`` ran ``count`` times in a row (``count`` >= 2)."""

    body: tuple[Item, ...]
    count: int

    @property
    def width(self) -> int:
        """Events in one pass of the body."""
        return sum(item.width * item.count if isinstance(item, Loop) else 1 for item in self.body)


Item = Union[int, Loop]  # a token id (one event) or a folded loop


def fold(tokens: np.ndarray, max_period: int = MAX_PERIOD) -> list[Item]:
    """Compress consecutive repeats of ``tokens`` into loops, shortest period first.

    A pass for period ``p`` compares the sequence with itself shifted by ``p``
    (numpy); every run of at least ``p`` equal positions is a body repeated at least
    twice and becomes one new token. After a pass that folded something the search
    restarts at ``p = 1``, so loops nest: substeps inside a step inside an iteration.
    Each pass is linear in the (shrinking) sequence."""
    seq = np.asarray(tokens, dtype=np.int64)
    if len(seq) == 0:
        return []
    next_id = int(seq.max()) + 1
    first_loop = next_id
    bodies: dict[tuple[tuple[int, ...], int], int] = {}
    loops: dict[int, tuple[tuple[int, ...], int]] = {}
    period = 1
    while period <= max_period and 2 * period <= len(seq):
        equal = seq[:-period] == seq[period:]
        edges = np.diff(np.concatenate(([0], equal.view(np.int8), [0])))
        starts = np.nonzero(edges == 1)[0]
        lengths = np.nonzero(edges == -1)[0] - starts
        keep = lengths >= period
        if not np.any(keep):
            period += 1
            continue
        mask = np.ones(len(seq), dtype=bool)
        new = seq.copy()
        covered = -1
        for start, length in zip(starts[keep].tolist(), lengths[keep].tolist()):
            if start < covered:
                continue
            reps = (length + period) // period
            key = (tuple(seq[start : start + period].tolist()), reps)
            loop_id = bodies.get(key)
            if loop_id is None:
                loop_id = bodies[key] = next_id
                loops[loop_id] = key
                next_id += 1
            new[start] = loop_id
            covered = start + reps * period
            mask[start + 1 : covered] = False
        seq = new[mask]
        period = 1
    expanded: dict[int, Loop] = {}

    def item(token: int) -> Item:
        if token < first_loop:
            return token
        loop = expanded.get(token)
        if loop is None:
            body, reps = loops[token]
            loop = expanded[token] = Loop(tuple(item(t) for t in body), reps)
        return loop

    return [item(t) for t in seq.tolist()]
