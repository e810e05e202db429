"""Host round trips: values that left Warp memory (``numpy()``) and came back (an array made
or assigned from host data), linked by the content digest the recorder stores in both
events' ``detail`` (see :mod:`warptrace.record.wrap.hostdata`).

- **host links**: each host-write copy -> the latest earlier value read with the same
  digest and size (the checkpoint it restores, the adjoint it hands over).
- **carried writers**: through untaped copies and host round trips, the recorded events
  whose values an event's reads saw (state carried to the next window by ``wp.copy`` or
  by ``wp.array(x.numpy())`` stays connected to the tape that produced it).
"""

from __future__ import annotations

import json
from functools import cached_property

import numpy as np

from warptrace.analysis.dataflow.provenance import Provenance
from warptrace.trace import schema as S

# How many transfers (copies, round trips) a value is followed through.
_HOPS = 8


class HostLinks(Provenance):
    """Host-transfer links and the writers seen through transfers."""

    @cached_property
    def host_links(self) -> dict[int, int]:
        """Host-write copy event -> the value-read event whose bytes it wrote back."""
        m = self.model
        K = self._K
        candidates = np.nonzero((m.kind == K[S.COPY]) | (m.kind == K[S.VALUE_READ]))[0]
        latest: dict[tuple[str, int], int] = {}
        links: dict[int, int] = {}
        for ev, text in zip(candidates.tolist(), m.detail_texts(candidates)):
            if not text or '"host"' not in text:
                continue
            try:
                facts = json.loads(text)
            except ValueError:
                continue
            if not isinstance(facts, dict):
                continue
            digest = facts.get("digest")
            if not isinstance(digest, str):
                continue
            key = (digest, int(facts.get("nbytes", -1)))
            if facts.get("host") == "read":
                latest[key] = ev
            elif facts.get("host") == "write" and key in latest:
                links[ev] = latest[key]
        return links

    @cached_property
    def host_restored(self) -> dict[int, tuple[int, int]]:
        """Array written by a linked host write -> (host-write event, value-read event)."""
        m = self.model
        out: dict[int, tuple[int, int]] = {}
        for write_ev, read_ev in self.host_links.items():
            for r in m.accesses_of(write_ev):
                if self.is_write[r]:
                    out[int(m.acc_array[r])] = (write_ev, read_ev)
        return out

    def carried_writer_rows(self, ev: int) -> list[int]:
        """The write rows (of events that are not transfers) whose values the reads of ``ev``
        saw, through untaped copies and host round trips."""
        m = self.model
        out: list[int] = []
        frontier = [ev]
        seen = {ev}
        for _ in range(_HOPS):
            following = []
            for current in frontier:
                source = self.host_links.get(current, current)
                for row in m.accesses_of(source):
                    if not self.is_read[row]:
                        continue
                    for write_row in self.writer_rows(row).tolist():
                        writer = int(self.acc_ev[write_row])
                        if writer >= current:
                            continue
                        if not self.is_transfer(writer):
                            out.append(write_row)
                        elif writer not in seen:
                            seen.add(writer)
                            following.append(writer)
            frontier = following
            if not frontier:
                break
        return out

    def is_transfer(self, ev: int) -> bool:
        """An untaped forward copy (device copy or host write): it carries values unchanged."""
        m = self.model
        return bool(
            m.kind[ev] == self._K[S.COPY]
            and not m.recorded[ev]
            and m.phase[ev] == S.FORWARD
            and m.parent[ev] < 0
        )

    def carried_writers(self, ev: int) -> set[int]:
        """``{ev}`` for an event that is not a transfer; for a transfer, the non-transfer events
        whose values it carried (through host links and chains of copies)."""
        out: set[int] = set()
        frontier = [ev]
        seen = {ev}
        for _ in range(_HOPS):
            following = []
            for current in frontier:
                if not self.is_transfer(current):
                    out.add(current)
                    continue
                source = self.host_links.get(current, current)
                for writer in self.writer_events(source):
                    if writer not in seen and writer < current:
                        seen.add(writer)
                        following.append(writer)
            frontier = following
            if not frontier:
                break
        return out
