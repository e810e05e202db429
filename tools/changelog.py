#!/usr/bin/env python3
"""Fold the changelog fragments (``changelog.d/*.md``) into CHANGELOG.md's Unreleased section.

    python tools/changelog.py           # fold every fragment, then delete it
    python tools/changelog.py --check   # change nothing; exit 1 when a fragment is malformed

A fragment holds Keep a Changelog headings (``### Added``, ``### Changed``, ``### Deprecated``,
``### Removed``, ``### Fixed``, ``### Security``), each followed by ``- `` lines, one per change a
user can notice (a line may continue on indented lines). Lines are appended under the matching
heading of ``## Unreleased`` (created in Keep a Changelog's order when missing), fragments in
name order. See docs/dev/changelog.md.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
UNRELEASED = "## Unreleased"


def parse_fragment(text: str, name: str = "fragment") -> tuple[dict[str, list[str]], list[str]]:
    """(entries by heading, problems). An entry is one ``- `` line with its continuation lines."""
    entries: dict[str, list[str]] = {}
    problems: list[str] = []
    current: list[str] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        heading = re.match(r"^###\s+(.+?)\s*$", line)
        if heading:
            kind = heading.group(1)
            if kind not in KINDS:
                problems.append(f"{name}:{number}: unknown heading {kind!r} (one of {', '.join(KINDS)})")
                current = []  # its lines are part of that problem, not problems of their own
                continue
            current = entries.setdefault(kind, [])
        elif line.startswith("- "):
            if current is None:
                problems.append(f"{name}:{number}: a change line before any ### heading")
                continue
            current.append(line.rstrip())
        elif line.startswith((" ", "\t")) and current:
            current[-1] += "\n" + line.rstrip()
        else:
            problems.append(
                f"{name}:{number}: expected '### Heading' or '- change', got {line.strip()[:40]!r}"
            )
    if not any(entries.values()) and not problems:
        problems.append(f"{name}: no change lines")
    return entries, problems


def fold(changelog: str, fragments: list[dict[str, list[str]]]) -> str:
    """``changelog`` with every fragment's entries appended under ``## Unreleased``."""
    lines = changelog.splitlines()
    if UNRELEASED not in lines:
        first = next((i for i, line in enumerate(lines) if line.startswith("## ")), len(lines))
        lines[first:first] = [UNRELEASED, ""]
    start = lines.index(UNRELEASED) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    section = _sections(lines[start:end])
    for fragment in fragments:
        for kind, entries in fragment.items():
            section.setdefault(kind, []).extend(entries)
    body: list[str] = [""]
    for kind in [k for k in KINDS if k in section] + [k for k in section if k not in KINDS]:
        body += [f"### {kind}", *section[kind], ""]
    return "\n".join([*lines[:start], *body, *lines[end:]]).rstrip("\n") + "\n"


def _sections(lines: list[str]) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        heading = re.match(r"^###\s+(.+?)\s*$", line)
        if heading:
            current = sections.setdefault(heading.group(1), [])
        elif line.strip() and current is not None:
            current.append(line.rstrip())
    return sections


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 on a malformed fragment")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    paths = sorted((args.root / "changelog.d").glob("*.md"))
    parsed, problems = [], []
    for path in paths:
        entries, found = parse_fragment(path.read_text(), str(path.relative_to(args.root)))
        parsed.append(entries)
        problems += found
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    if args.check:
        print(f"{len(paths)} changelog fragment(s), all well-formed")
        return 0
    if not paths:
        print("no changelog fragments")
        return 0
    changelog = args.root / "CHANGELOG.md"
    changelog.write_text(fold(changelog.read_text(), parsed))
    for path in paths:
        path.unlink()
    print(f"folded {len(paths)} fragment(s) into CHANGELOG.md: {', '.join(p.name for p in paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
