"""The value summaries of a ``--check-numerics`` trace, as the WT5xx rules and the health
timeline read them (no Warp).

:func:`numerics_of` returns ``None`` for a trace without the ``numerics`` table (recorded
without the flag, or before schema version 3): every WT5xx rule is then silent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from warptrace.analysis.model import Model

__all__ = ["NumericsTable", "Summary", "adjoint_checks", "numerics_of", "total_norm"]


@dataclass(frozen=True)
class Summary:
    """One row of the ``numerics`` table (columns documented in :mod:`warptrace.trace.schema`)."""

    seq: int
    array_id: int
    owner: int
    what: str
    arg: str
    field: str
    count: int
    nonfinite: int
    zeros: int
    first_bad: int
    min: float | None
    max: float | None
    l2: float
    hash: str

    @property
    def finite(self) -> bool:
        return self.nonfinite == 0

    @property
    def all_zero(self) -> bool:
        return self.count > 0 and self.zeros == self.count

    @property
    def value(self) -> float:
        """The value of a one-element array (a loss), else the L2 norm."""
        if self.count == 1 and self.min is not None:
            return float(self.min)
        return float("nan") if self.nonfinite else self.l2


class NumericsTable:
    """The summaries by event, and each array's summaries in time order."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = [Summary(**row) for row in rows]
        self.rows.sort(key=lambda r: r.seq)  # stable: the recorder's order within an event
        self.by_seq: dict[int, list[Summary]] = {}
        self.by_array: dict[int, list[Summary]] = {}
        for row in self.rows:
            self.by_seq.setdefault(row.seq, []).append(row)
            self.by_array.setdefault(row.array_id, []).append(row)
        self._array_seqs = {
            a: np.array([r.seq for r in rows], dtype=np.int64) for a, rows in self.by_array.items()
        }

    def before(self, array_id: int, seq: int) -> Summary | None:
        """The array's last summary taken after an event before ``seq``."""
        seqs = self._array_seqs.get(int(array_id))
        if seqs is None:
            return None
        index = int(np.searchsorted(seqs, seq, side="left")) - 1
        return self.by_array[int(array_id)][index] if index >= 0 else None

    def of_kind(self, what: str) -> list[Summary]:
        return [row for row in self.rows if row.what == what]

    def nonfinite_seqs(self, kinds: tuple[str, ...]) -> np.ndarray:
        """The seqs (sorted, with repeats) of the summaries of these kinds holding NaN/inf."""
        return np.array([row.seq for row in self.rows if row.nonfinite and row.what in kinds], dtype=np.int64)


def numerics_of(model: Model) -> NumericsTable | None:
    """The summaries of the model's trace; None when the trace has no ``numerics`` table (built
    on first use, kept in ``model.derived``)."""
    if "numerics" not in model.derived:
        table = model.trace.tables.get("numerics")
        model.derived["numerics"] = NumericsTable(table.to_pylist()) if table is not None else None
    return model.derived["numerics"]


def adjoint_checks(model: Model) -> list[dict[str, Any]]:
    """meta.json ``numerics.adjoint_checks`` (WT502's measurements); [] when absent."""
    numerics = model.meta.get("numerics")
    checks = numerics.get("adjoint_checks") if isinstance(numerics, dict) else None
    return [c for c in checks if isinstance(c, dict)] if isinstance(checks, list) else []


def total_norm(norms: dict[str, dict[str, Any]]) -> float | None:
    """The L2 norm over several leaves from their ``{"l2", "nonfinite"}`` entries (a step of the
    health timeline); None when there is none or one of them is non-finite."""
    if not norms or any(entry["nonfinite"] for entry in norms.values()):
        return None
    return float(np.sqrt(sum(float(entry["l2"]) ** 2 for entry in norms.values())))
