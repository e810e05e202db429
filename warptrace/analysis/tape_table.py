"""The model's table of tapes: per tape id, its events and the seqs of its backward calls,
resets and zeros, grouped from the events columns in a few array passes."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from warptrace.trace import schema as S

K = S.EVENT_KIND_CODES


@dataclass(eq=False)
class TapeInfo:
    tape_id: int
    created_ev: int = -1
    # every event whose `tape` column is this tape, in order (as a list: `events`, made on first use)
    event_array: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False)
    backward_begins: list[int] = field(default_factory=list)  # seqs
    backward_ends: list[int] = field(default_factory=list)  # seqs
    resets: list[int] = field(default_factory=list)  # seqs
    zeros: list[int] = field(default_factory=list)  # seqs

    @cached_property
    def events(self) -> list[int]:
        """Every event whose ``tape`` column is this tape, in order."""
        events: list[int] = self.event_array.tolist()
        return events


def tape_table(tape: np.ndarray, kind: np.ndarray, seq: np.ndarray) -> dict[int, TapeInfo]:
    """The tapes of the events (columns ``tape``, ``kind``, ``seq``, in event order), in order of
    first appearance, each with its events in order."""
    tape_events = np.nonzero(tape >= 0)[0]
    grouped = tape_events[np.argsort(tape[tape_events], kind="stable")]  # by tape, event order kept
    # the tape ids come sorted: each tape's first position is where the id changes (np.unique's
    # return_index, without its sort)
    sorted_ids = tape[grouped]
    new_id = np.ones(len(sorted_ids), dtype=bool)
    np.not_equal(sorted_ids[1:], sorted_ids[:-1], out=new_id[1:])
    starts = np.flatnonzero(new_id)
    unique = sorted_ids[starts]
    stops = [*starts[1:].tolist(), len(grouped)]
    kinds, seqs = kind[grouped], seq[grouped]
    created = _grouped_lists(starts, kinds == K[S.TAPE_CREATE], grouped)
    changes = [  # per tape: its backward begins and ends, resets, zeros
        _grouped_lists(starts, kinds == K[name], seqs)
        for name in (S.BACKWARD_BEGIN, S.BACKWARD_END, S.TAPE_RESET, S.TAPE_ZERO)
    ]
    tapes: dict[int, TapeInfo] = {}
    for u in np.argsort(grouped[starts], kind="stable").tolist():
        events = grouped[int(starts[u]) : stops[u]]
        info = tapes[int(unique[u])] = TapeInfo(int(unique[u]), created[u][-1] if created[u] else -1, events)
        info.backward_begins, info.backward_ends, info.resets, info.zeros = (column[u] for column in changes)
    return tapes


def _grouped_lists(starts: np.ndarray, select: np.ndarray, values: np.ndarray) -> list[list[int]]:
    """Per group of positions of ``values`` (group ``g`` from ``starts[g]`` to the next start;
    ``starts`` ascending from 0): its values where ``select`` holds, in order."""
    at = np.nonzero(select)[0]
    cuts = [*np.searchsorted(at, starts).tolist(), len(at)]
    items = values[at].tolist()
    return [items[a:b] for a, b in zip(cuts[:-1], cuts[1:])]
