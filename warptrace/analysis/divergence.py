"""Divergence: the optimization blew up before the first NaN/inf (no Warp).

Two stories end in the same NaN. In one, a kernel turns moderate inputs into NaN (a domain
origin, WT501). In the other, the run's loss and norms grow step after step across parameter
updates until a square or an exponential overflows: the overflowing launch is innocent, the
cause is earlier, a wrong gradient (an error finding upstream) or, with a correct gradient,
a step size too large for the problem's curvature. :func:`detect` reads the second story
from the gradient health timeline (:mod:`warptrace.analysis.health`):

- the **first non-finite step** of a series: the first backward whose loss, leaf gradients or
  leaf values hold NaN/inf, and the first summary with a non-finite value since the step
  before it (the launch that overflowed, with the magnitudes it read:
  :mod:`warptrace.analysis.overflow`);
- **growth** before it, in the loss, else the total gradient norm, else the total parameter
  norm: from its last minimum, at least :data:`MIN_RISES` new highs and a factor of at least
  :data:`MIN_FACTOR`, with the parameters changed by an update at least :data:`MIN_RISES`
  times on the way (a rollout replayed with the same parameters is not an optimization);
- **curvature** along the path, where the recorder kept the changes of small leaves: from the
  first step where every later step took a step size above ``2 / L`` (``L = |g_k - g_k-1| /
  |p_k - p_k-1|``, a lower bound of the largest curvature along the step, so the claim "above
  the stability limit of gradient descent" holds for a quadratic whatever ``L`` misses).

At most one divergence per run: the series that blew up first. Without one, a **rollout**
that blew up is the same story inside one forward pass (:func:`rollout_of`): the first
non-finite value of the run on the way to a gradient comes from a launch whose inputs have
grown by :data:`~warptrace.analysis.overflow.GROWTH` over at least :data:`MIN_RISES` earlier
launches at the same line (an unstable time step, a recurrence with a gain above 1).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np

from warptrace.analysis.model import K, Model
from warptrace.analysis.numerics import NumericsTable, Summary, total_norm
from warptrace.analysis.overflow import InputScale, input_scale
from warptrace.trace import schema as S

__all__ = [
    "MIN_FACTOR",
    "MIN_RISES",
    "Curvature",
    "Divergence",
    "NonFinite",
    "Rollout",
    "detect",
    "rollout_of",
]

MIN_RISES = 3  # new highs of the growing quantity after its last minimum
MIN_FACTOR = 100.0  # growth from that minimum to the last finite step
_BAD_KINDS = (S.NUM_WRITE, S.NUM_LOSS, S.NUM_LEAF_GRAD, S.NUM_LEAF)


@dataclass(frozen=True)
class NonFinite:
    """The first non-finite value of the diverged series."""

    seq: int
    ev: int  # event index (-1 when the summary follows no known event)
    what: str  # the summary kind (write, loss, leaf_grad, leaf)
    array_id: int
    arg: str
    nonfinite: int
    count: int
    scale: InputScale | None  # for a launch: the magnitudes it read


@dataclass(frozen=True)
class Curvature:
    """Step size against the stability limit 2/L of gradient descent, from step ``start`` on."""

    start: int
    step_size: float  # median |p_k - p_k-1| / |g_k-1| from there
    limit: float  # median 2 / L_k from there


@dataclass(frozen=True)
class Divergence:
    series: int  # index of the health series
    backward: dict[str, Any]  # the series' backward call site
    start: int  # step where growth began (its last minimum)
    last: int  # the last finite step
    bad_step: int  # the first step holding a non-finite value
    quantity: str  # "loss", "gradient norm" or "parameter norm"
    low: float  # the quantity at ``start``
    high: float  # the quantity at ``last``
    rises: int  # new highs from start to last
    updates: int  # steps in (start, last] whose parameters an update changed
    losses: tuple[float | None, float | None]  # loss at start and last
    grad_norms: tuple[float | None, float | None]
    param_norms: tuple[float | None, float | None]
    start_seq: int  # the seq of the start step's backward
    start_backward: int  # its number among every backward of the run (from 1: gradcheck --at)
    update_ev: int  # the first event after the start step's backward that wrote a leaf (-1: none)
    first: NonFinite | None
    curvature: Curvature | None

    @property
    def factor(self) -> float:
        return self.high / self.low if self.low > 0 else math.inf

    def to_dict(self) -> dict[str, Any]:
        """The JSON view (the ``divergence`` key of a health series)."""
        return {
            "start_step": self.start,
            "last_finite_step": self.last,
            "nonfinite_step": self.bad_step,
            "quantity": self.quantity,
            "from": self.low,
            "to": self.high,
            "start_backward": self.start_backward,
            "first_nonfinite_seq": self.first.seq if self.first is not None else None,
            "curvature": None
            if self.curvature is None
            else {
                "from_step": self.curvature.start,
                "step_size": self.curvature.step_size,
                "limit": self.curvature.limit,
            },
        }


@dataclass(frozen=True)
class Rollout:
    """A state that grew along the launches of one line until it overflowed."""

    first: NonFinite  # the first non-finite value of the run (its scale: grown)


def rollout_of(model: Model, table: NumericsTable) -> Rollout | None:
    """The rollout story, when the run's first non-finite value on the way to a gradient is an
    overflow of inputs that grew along the earlier launches of the same line."""
    seqs = np.unique(table.nonfinite_seqs((S.NUM_WRITE,)))
    for row in (r for seq in seqs.tolist() for r in table.by_seq[seq]):
        if row.what != S.NUM_WRITE or not row.nonfinite:
            continue
        try:
            ev = model.ev_of_seq(row.seq)
        except KeyError:
            continue
        if model.kind[ev] != K[S.LAUNCH] or not model.executed[ev]:
            continue
        if not model.adjoint[ev] and (
            not model.recorded[ev] or model.backward_after(int(model.tape[ev]), row.seq) is None
        ):
            continue  # not on the way to a gradient (a NaN sentinel is the program's business)
        info = model.arrays.get(row.array_id)
        scale = input_scale(model, table, ev, row.seq, info.dtype if info is not None else "float32")
        if not scale.grown or scale.history < MIN_RISES:
            return None
        return Rollout(
            NonFinite(row.seq, ev, row.what, row.array_id, row.arg, row.nonfinite, row.count, scale)
        )
    return None


def detect(model: Model, table: NumericsTable, series: list[dict[str, Any]]) -> Divergence | None:
    """The run's divergence, or None: of the series that grew before a non-finite step, the one
    whose non-finite step comes first."""
    found: Divergence | None = None
    for index, entry in enumerate(series):
        candidate = _series(model, table, index, entry)
        if candidate is None:
            continue
        bad_seq = int(entry["steps"][candidate.bad_step]["seq"])
        if found is None or bad_seq < int(series[found.series]["steps"][found.bad_step]["seq"]):
            found = candidate
    return found


def _series(model: Model, table: NumericsTable, index: int, entry: dict[str, Any]) -> Divergence | None:
    steps = entry["steps"]
    bad_step = _first_bad_step(table, steps)
    if bad_step is None or bad_step < MIN_RISES + 1:
        return None
    finite = steps[:bad_step]
    quantities = (
        ("loss", [step["loss"] for step in finite]),
        ("gradient norm", [total_norm(step["grads"]) for step in finite]),
        ("parameter norm", [total_norm(step["params"]) for step in finite]),
    )
    for name, values in quantities:
        growth = _growth(values)
        if growth is None:
            continue
        start, rises = growth
        updates = [bool(step["updated"]) for step in finite[start + 1 :] if step["updated"] is not None]
        if updates and sum(updates) < MIN_RISES:
            continue  # the parameters hardly moved: not an optimization diverging
        last = len(finite) - 1
        losses = [step["loss"] for step in finite]
        grads = [total_norm(step["grads"]) for step in finite]
        params = [total_norm(step["params"]) for step in finite]
        calls = _backward_numbers(model)
        return Divergence(
            series=index,
            backward=entry["backward"],
            start=start,
            last=last,
            bad_step=bad_step,
            quantity=name,
            low=float(values[start]),  # type: ignore[arg-type]
            high=float(values[last]),  # type: ignore[arg-type]
            rises=rises,
            updates=sum(updates),
            losses=(losses[start], losses[last]),
            grad_norms=(grads[start], grads[last]),
            param_norms=(params[start], params[last]),
            start_seq=int(finite[start]["seq"]),
            start_backward=calls.get(int(finite[start]["seq"]), start + 1),
            update_ev=_update_after(model, table, finite, start),
            first=_first_nonfinite(model, table, steps, bad_step),
            curvature=_curvature(finite),
        )
    return None


def _first_bad_step(table: NumericsTable, steps: list[dict[str, Any]]) -> int | None:
    """The first step whose values (loss, leaf gradients and values) are non-finite, or during
    which (after the previous step's backward, up to the end of its own) an event wrote one."""
    bad_seqs = table.nonfinite_seqs(_BAD_KINDS)
    low = -1
    for index, step in enumerate(steps):
        high = int(step["end_seq"])
        if step["nonfinite"] or np.searchsorted(bad_seqs, high, "right") > np.searchsorted(
            bad_seqs, low, "right"
        ):
            return index
        low = high
    return None


def _growth(values: list[float | None]) -> tuple[int, int] | None:
    """(the step of the last minimum, new highs after it) when the series grows from there to its
    end by :data:`MIN_FACTOR` with :data:`MIN_RISES` new highs; None otherwise."""
    if not values or any(v is None or not math.isfinite(v) for v in values):
        return None
    numbers = [abs(float(v)) for v in values]  # type: ignore[arg-type]
    low = min(numbers)
    start = max(i for i, v in enumerate(numbers) if v == low)
    if start == len(numbers) - 1:
        return None
    rises, peak = 0, numbers[start]
    for value in numbers[start + 1 :]:
        if value > peak:
            rises, peak = rises + 1, value
    end = numbers[-1]
    if rises < MIN_RISES or end < MIN_FACTOR * low or end == 0.0:
        return None
    return start, rises


def _backward_numbers(model: Model) -> dict[int, int]:
    """seq of each backward_begin -> its number among every backward of the run, from 1."""
    begins = model.seq[model.kind == K[S.BACKWARD_BEGIN]]
    return {int(seq): number for number, seq in enumerate(begins.tolist(), start=1)}


def _update_after(model: Model, table: NumericsTable, finite: list[dict[str, Any]], start: int) -> int:
    """The first launch, copy or memset after the start step's backward, before the last finite
    step's, that wrote one of the start step's leaves (-1 when the update is not an event: a
    host write; several backward calls may come before one update)."""
    step = finite[start]
    leaves = {row.array_id for row in table.by_seq.get(int(step["end_seq"]), []) if row.what == S.NUM_LEAF}
    allocs = {model.arrays[a].alloc_id for a in leaves if a in model.arrays}
    if not allocs:
        return -1
    end = int(finite[-1]["end_seq"])
    first = int(np.searchsorted(model.seq, int(step["end_seq"]), side="right"))
    last = int(np.searchsorted(model.seq, end, side="left"))
    if last <= first:
        return -1
    rows = slice(int(model.acc_start[first]), int(model.acc_start[last]) if last < model.n_events else None)
    hits = np.flatnonzero(
        ((model.acc_role[rows] & S.ROLE_WRITE) != 0) & np.isin(model.acc_alloc[rows], list(allocs))
    )
    writers = np.isin(model.kind, [K[S.LAUNCH], K[S.COPY], K[S.MEMSET]]) & ~model.adjoint & model.executed
    for hit in hits.tolist():
        ev = int(np.searchsorted(model.acc_stop, rows.start + hit, side="right"))
        if first <= ev < last and writers[ev]:
            return ev
    return -1


def _first_nonfinite(
    model: Model, table: NumericsTable, steps: list[dict[str, Any]], bad_step: int
) -> NonFinite | None:
    """The first summary with a non-finite value after the last finite step's backward."""
    low = int(steps[bad_step - 1]["end_seq"]) if bad_step > 0 else -1
    high = int(steps[bad_step]["end_seq"])
    for row in _rows_between(table, low, high):
        if row.what not in _BAD_KINDS or not row.nonfinite:
            continue
        try:
            ev = model.ev_of_seq(row.seq)
        except KeyError:
            ev = -1
        scale = None
        if ev >= 0 and row.what == S.NUM_WRITE and model.kind[ev] == K[S.LAUNCH]:
            info = model.arrays.get(row.array_id)
            scale = input_scale(model, table, ev, row.seq, info.dtype if info is not None else "float32")
        return NonFinite(row.seq, ev, row.what, row.array_id, row.arg, row.nonfinite, row.count, scale)
    return None


def _rows_between(table: NumericsTable, low: int, high: int) -> list[Summary]:
    seqs = [row.seq for row in table.rows]
    first = int(np.searchsorted(seqs, low, side="right"))
    last = int(np.searchsorted(seqs, high, side="right"))
    return table.rows[first:last]


def _curvature(finite: list[dict[str, Any]]) -> Curvature | None:
    """From the first step where every later step (at least MIN_RISES of them) took a step size
    above 2/L: the step size and 2/L there (medians)."""
    measured = [
        (i, float(step["step_size"]), float(step["curvature"]))
        for i, step in enumerate(finite)
        if step.get("step_size") and step.get("curvature")
    ]
    if len(measured) < MIN_RISES:
        return None
    start = len(measured)
    while start > 0 and measured[start - 1][1] * measured[start - 1][2] > 2.0:
        start -= 1
    tail = measured[start:]
    if len(tail) < MIN_RISES:
        return None
    return Curvature(
        start=tail[0][0],
        step_size=statistics.median(size for _, size, _ in tail),
        limit=statistics.median(2.0 / curv for _, _, curv in tail),
    )
