"""The activity counts of a run (the recorder's summary, ``show``'s header): their names and
text. No pyarrow here: the run command prints them in the recorded process, which does not
import pyarrow when a trace-writer process wrote the parts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# (summary key, singular, plural)
COUNT_NOUNS: tuple[tuple[str, str, str], ...] = (
    ("tapes", "tape", "tapes"),
    ("recorded_launches", "recorded launch", "recorded launches"),
    ("untaped_launches", "untaped launch", "untaped launches"),
    ("copies", "copy", "copies"),
    ("memsets", "memset", "memsets"),
    ("backward_calls", "backward call", "backward calls"),
    ("arrays", "array", "arrays"),
)


def has_activity(counts: Mapping[str, Any]) -> bool:
    """False when the program made no Warp call the recorder saw (all counts zero)."""
    return any(counts.get(key) for key, _, _ in COUNT_NOUNS)


def format_counts(counts: Mapping[str, Any]) -> str:
    """``1 tape, 2 recorded launches, ...``; a missing count shows as ``?``."""
    parts = []
    for key, singular, plural in COUNT_NOUNS:
        value = counts.get(key)
        parts.append(f"{'?' if value is None else value} {singular if value == 1 else plural}")
    return ", ".join(parts)


__all__ = ["COUNT_NOUNS", "format_counts", "has_activity"]
