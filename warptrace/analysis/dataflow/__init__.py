"""Dataflow over the trace: who wrote what each access read, backward calls, gradient state.

Derived once per analysis (``model.dataflow``) for the accumulation and flow rules:

- **def-use edges**: for every read access row, the write rows that produced the bytes
  it read (the nearest overlapping write, then earlier ones while the nearer writes
  only accumulate into or partly cover the read range). Computed with a sort and a
  binary search per allocation, stepping back a bounded number of writes: linear-ish
  in the number of access rows, never quadratic.
- **backward calls** (:class:`BackwardCall`) with the events they ran, and **tape
  epochs**: a tape between two ``tape.reset()`` calls is one recording; every recorded
  event belongs to one epoch and is replayed by the epoch's backward calls.
- **gradient state over time**: whether an array object has a ``.grad`` at a given
  seq (``requires_grad`` at registration, then ``set_requires_grad``/``set_grad``
  events), whether it keeps its gradient (``retain_grad``), which array is its
  ``.grad`` then, and whose gradient a grad buffer is.
- **provenance**: for every recorded forward event, the differentiable leaves
  (arrays with a gradient that no recorded event produced: parameters, initial
  states) whose values flowed into it along recorded launches and copies.
- **host round trips**: a host write (``wp.array(saved)``, ``assign(ndarray)``) linked to
  the value read (``numpy()``) whose bytes it restores, by content digest; writers seen
  through untaped copies and such round trips.

Everything is computed from the model's numpy columns; nothing imports Warp.
"""

from __future__ import annotations

from warptrace.analysis.dataflow.base import combine_codes
from warptrace.analysis.dataflow.fill_groups import FillGroups
from warptrace.analysis.dataflow.host import HostLinks
from warptrace.analysis.dataflow.tapes import BackwardCall, Epoch
from warptrace.analysis.model import Model

__all__ = ["BackwardCall", "Dataflow", "Epoch", "FillGroups", "combine_codes", "dataflow_of"]


class Dataflow(HostLinks):
    """Def-use edges, backward calls, tape epochs, gradient state and provenance of one model.

    The parts are layered classes, each using only the ones below it:
    :mod:`.base` -> :mod:`.defuse` -> :mod:`.replayed` -> :mod:`.tapes` -> :mod:`.grad_state` -> :mod:`.seeds`
    -> :mod:`.provenance` -> :mod:`.host`."""

    def __init__(self, model: Model) -> None:
        super().__init__(model)
        self._build_edges()
        self._build_tapes()
        self._build_grad_state()


def dataflow_of(model: Model) -> Dataflow:
    """The dataflow of ``model``, built on first use and shared by every rule (kept in
    ``model.derived``, so it goes when the model goes)."""
    dataflow = model.derived.get("dataflow")
    if dataflow is None:
        dataflow = model.derived["dataflow"] = Dataflow(model)
    return dataflow
