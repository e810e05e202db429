"""Were a launch's inputs moderate? The question that separates a domain origin of NaN/inf
from an overflow at the end of a divergence (no Warp).

A kernel that turns finite, *moderate* inputs into NaN or inf has a domain error (``sqrt`` of a
negative, ``log(0)``, ``0/0``, the unselected branch of ``wp.where``): that launch is the bug
(WT501). A kernel that squares a value of 1e19 and gets inf is innocent: its inputs were
already huge, and the cause is wherever they grew (WT505, a divergence). The answer comes from
the recorded value summaries, never from a guess about the kernel's math:

- **huge**: the largest finite magnitude the launch read is at or above ``max ** 0.4`` of the
  written float type (1.6e15 in float32, 84 in float16): the square of such a value, or its
  product with one more large factor, is within a few orders of magnitude of overflow, and
  no unit system puts legitimate float32 data there.
- **grown**: for some argument, the magnitude read now is at least :data:`GROWTH` times its
  median over the earlier launches of the same kernel at the same call site (the launch's own
  history; magnitudes there come from the summaries of whatever last wrote each array), and
  the largest input is at least :data:`GROWN_FLOOR` (a quantity that rises from rounding noise
  to ordinary values has grown too, but ordinary values overflow only through ``exp`` or a
  high power: a range error, still WT501).

Inputs that are neither are moderate. A launch with no history and ordinary values is moderate,
so a domain error on the first call is still a domain origin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from warptrace.analysis.model import K, Model
from warptrace.analysis.numerics import NumericsTable, Summary
from warptrace.trace import schema as S

__all__ = ["GROWTH", "InputScale", "float_max", "input_scale", "magnitude"]

GROWTH = 1e4  # inputs this many times their usual magnitude at the call site have "grown"...
GROWN_FLOOR = 1e3  # ...when they are this large too: below it only exp or a high power overflows
HISTORY = 32  # earlier launches of the kernel at the site that make its history
HUGE_EXPONENT = 0.4  # huge: at or above float_max(dtype) ** HUGE_EXPONENT


def magnitude(row: Summary | None) -> float | None:
    """The largest finite magnitude in a summary (None when it has no finite value)."""
    if row is None or row.min is None or row.max is None:
        return None
    return max(abs(float(row.min)), abs(float(row.max)))


def float_max(dtype: str) -> float:
    """The largest finite value of a Warp dtype name (``float``, ``vec3d``, ``mat33h``, ...)."""
    name = dtype.lower()
    if "float64" in name or (name[-1:] == "d" and not name.startswith("float")):
        return float(np.finfo(np.float64).max)
    if "float16" in name or (name[-1:] == "h" and not name.startswith("float")):
        return float(np.finfo(np.float16).max)
    return float(np.finfo(np.float32).max)


@dataclass(frozen=True)
class InputScale:
    """What a launch read, as magnitudes: the evidence for "moderate"."""

    largest: float  # max |finite value| over everything the launch read (0.0 when unknown)
    limit: float  # "huge" from here on (float_max(dtype) ** HUGE_EXPONENT)
    growth: float  # max over arguments of (magnitude now) / (its median in the history); 1.0 if none
    grown_arg: str  # the argument of that growth ("" when none)
    history: int  # earlier launches of the kernel at the site that the growth is measured against

    @property
    def huge(self) -> bool:
        return self.largest >= self.limit

    @property
    def grown(self) -> bool:
        return self.growth >= GROWTH and self.largest >= GROWN_FLOOR

    @property
    def moderate(self) -> bool:
        return not self.huge and not self.grown

    def describe(self) -> str:
        """Why the inputs were not moderate, in words ("" when they were)."""
        grown = (
            f"{self.growth:.3g} times their usual magnitude over the kernel's {self.history} earlier launches "
            f"at that line (argument `{self.grown_arg}`)"
        )
        if self.huge:
            text = f"it read values up to {self.largest:.3g} (float overflow territory from {self.limit:.2g})"
            return f"{text}, {grown}" if self.grown else text
        if self.grown:
            return f"it read values {grown}"
        return ""


def input_scale(model: Model, table: NumericsTable, ev: int, seq: int, dtype: str = "float32") -> InputScale:
    """The magnitudes launch ``ev`` (summarized at ``seq``) read, against its own history.

    ``dtype`` is the type of the array it wrote non-finite values into (it sets "huge")."""
    now = _read_magnitudes(model, table, ev, seq, with_inputs=True)
    largest = max(now.values(), default=0.0)
    growth, grown_arg, history = 1.0, "", 0
    earlier = _history(model, ev)
    if earlier:
        past: dict[tuple[str, str, bool], list[float]] = {}
        for other in earlier:
            for key, value in _read_magnitudes(model, table, other, int(model.seq[other])).items():
                past.setdefault(key, []).append(value)
        history = len(earlier)
        for key, value in now.items():
            values = past.get(key)
            if not values:
                continue
            usual = float(np.median(values))
            if usual > 0.0 and value / usual > growth:
                growth, grown_arg = value / usual, key[0] + (f".{key[1]}" if key[1] else "")
    limit = float_max(dtype) ** HUGE_EXPONENT
    return InputScale(largest, limit, growth, grown_arg, history)


def _read_magnitudes(
    model: Model, table: NumericsTable, ev: int, seq: int, with_inputs: bool = False
) -> dict[tuple[str, str, bool], float]:
    """(arg, field, is gradient) -> the largest finite magnitude the launch read there: from the
    state each read array was left in by its last summarized writer, and (``with_inputs``) from
    the input summaries taken with the launch itself."""
    found: dict[tuple[str, str, bool], float] = {}

    def note(key: tuple[str, str, bool], value: float | None) -> None:
        if value is not None and math.isfinite(value):
            found[key] = max(found.get(key, 0.0), value)

    for acc in range(int(model.acc_start[ev]), int(model.acc_stop[ev])):
        role = int(model.acc_role[acc])
        reads = role & S.ROLE_READ or (role & S.ROLE_WRITE and int(model.acc_flags[acc]) & S.FLAG_ACCUMULATE)
        if not reads:
            continue
        array_id = int(model.acc_array[acc])
        key = (str(model.acc_arg[acc] or ""), str(model.acc_field[acc] or ""), model.is_grad_array(array_id))
        note(key, magnitude(table.before(array_id, seq)))
    if with_inputs:
        for row in table.by_seq.get(seq, []):
            if row.what == S.NUM_INPUT:
                note((row.arg, row.field, model.is_grad_array(row.array_id)), magnitude(row))
    return found


def _history(model: Model, ev: int) -> list[int]:
    """The last :data:`HISTORY` executed launches of the same kernel, forward or adjoint alike,
    from the same call site, before ``ev``."""
    groups = model.derived.get("launch_groups")
    if groups is None:
        launches = np.flatnonzero((model.kind == K[S.LAUNCH]) & model.executed)
        keys = np.stack(
            [model.kernel[launches], model.adjoint[launches].astype(np.int64), model.site[launches]]
        )
        groups = {}
        if launches.size:
            unique, inverse = np.unique(keys, axis=1, return_inverse=True)
            order = np.argsort(inverse.reshape(-1), kind="stable")
            cuts = np.searchsorted(inverse.reshape(-1)[order], np.arange(unique.shape[1] + 1))
            for index in range(unique.shape[1]):
                groups[tuple(int(v) for v in unique[:, index])] = launches[
                    order[cuts[index] : cuts[index + 1]]
                ]
        model.derived["launch_groups"] = groups
    same = groups.get((int(model.kernel[ev]), int(model.adjoint[ev]), int(model.site[ev])))
    if same is None:
        return []
    stop = int(np.searchsorted(same, ev))
    return [int(i) for i in same[max(0, stop - HISTORY) : stop]]
