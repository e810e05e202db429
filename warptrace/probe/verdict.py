"""Finite differences against autodiff: the numbers and the verdict (pure; no Warp).

Everything is compared in *objective units*: over a step ``t = ±h`` along the fixed
direction, the finite-difference change is ``fd = Q(+h) - Q(-h)`` and autodiff predicts
``ad = 2h * (directional derivative)``. The float32 objective resolves only its ulp,
so a change is *resolved* when it exceeds ``NOISE_ULPS`` ulps of the objective (plus
twice the difference between two unperturbed runs). For a resolved eps the two agree
when ``|fd - ad| <= rtol * max(|fd|, |ad|) + noise``.

Verdict over the sweep: ``agree`` when one resolved eps agrees; ``disagree`` only when
every resolved eps disagrees *and* at least two resolved eps give the same finite
difference within ``FD_STABILITY`` (a kink or a staircase gives an unstable FD, which
proves nothing); otherwise ``undecided`` with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from warptrace.analysis.bisect import Cut, Plan
from warptrace.analysis.measure import Measurement

NOISE_ULPS = 8.0
FD_STABILITY = 0.1
DEFAULT_RTOL = 1e-2


@dataclass
class Point:
    eps: float
    fd: float  # directional derivative by central differences
    ad: float  # directional derivative by autodiff
    resolved: bool
    agree: bool
    rel_error: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "eps": self.eps,
            "fd": self.fd,
            "ad": self.ad,
            "resolved": self.resolved,
            "agree": self.agree if self.resolved else None,
            "rel_error": self.rel_error,
        }


@dataclass
class Comparison:
    verdict: str  # agree, disagree, undecided
    points: list[Point] = field(default_factory=list)
    resolution: float = 0.0  # objective units below which a change is not seen
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "verdict": self.verdict,
            "resolution": self.resolution,
            "sweep": [point.to_dict() for point in self.points],
        }
        if self.reason:
            out["reason"] = self.reason
        return out


def float32_resolution(values: list[float]) -> float:
    """Sum of the float32 ulps of the values (an objective summed over a window's losses)."""
    return float(sum(np.spacing(np.float32(abs(v))) for v in values))


def compare(
    sweep: list[tuple[float, float, float, float]],
    resolution: float,
    jitter: float = 0.0,
    rtol: float = DEFAULT_RTOL,
    one_sided: list[tuple[float, float]] | None = None,
) -> Comparison:
    """``sweep``: (eps, fd_change, ad_change, 2h) per eps; ``jitter``: |difference| of two unperturbed
    runs; ``one_sided``: per eps, (Q(+h) - Q(0), Q(0) - Q(-h)), which tell a kink (see :func:`kink`)."""
    noise = NOISE_ULPS * resolution + 2.0 * jitter
    points = []
    for eps, fd_change, ad_change, two_h in sweep:
        scale = max(abs(fd_change), abs(ad_change))
        resolved = scale > noise
        error = abs(fd_change - ad_change)
        agree = error <= rtol * scale + noise
        points.append(
            Point(
                eps=eps,
                fd=fd_change / two_h,
                ad=ad_change / two_h,
                resolved=resolved,
                agree=agree,
                rel_error=error / scale if scale > 0 else None,
            )
        )
    result = Comparison("undecided", points, noise)
    seen = [p for p in points if p.resolved]
    if any(p.agree for p in seen):
        result.verdict = "agree"
    elif not seen:
        if all(p.fd == 0.0 and p.ad == 0.0 for p in points):
            result.verdict = "agree"
            result.reason = "both sides are exactly zero (the quantity does not depend on the parameters)"
        else:
            result.reason = (
                f"the objective cannot resolve any eps: every change is below its float32 resolution "
                f"({noise:.3g}); try a larger --eps"
            )
    else:
        fds = [p.fd for p in seen]
        stable = any(
            abs(a - b) <= FD_STABILITY * max(abs(a), abs(b)) for i, a in enumerate(fds) for b in fds[i + 1 :]
        )
        at_kink = kink(sweep, one_sided, noise, rtol) if one_sided else None
        if stable and at_kink:
            result.reason = at_kink
        elif stable:
            result.verdict = "disagree"
        else:
            result.reason = (
                "finite differences do not settle across eps (a kink, a staircase or too few resolved eps): "
                "they prove nothing here"
            )
    return result


def kink(
    sweep: list[tuple[float, float, float, float]],
    one_sided: list[tuple[float, float]],
    noise: float,
    rtol: float = DEFAULT_RTOL,
) -> str | None:
    """Why the measured point sits on a kink, or None. Around a smooth point the right and left
    differences ``Q(+h) - Q(0)`` and ``Q(0) - Q(-h)`` part by O(h²), so relative to the central
    difference their gap shrinks with eps; at a kink (``max(x, 0)`` at 0, a contact switching)
    they are two different slopes whatever the eps, and any value between them is a valid
    subgradient: finite differences cannot judge the gradient there. A kink: the gap exceeds
    ``FD_STABILITY`` of the larger side at every resolved eps and does not halve from the
    largest eps to the smallest."""
    gaps = []
    for (eps, _fd, ad_change, two_h), (right, left) in zip(sweep, one_sided):
        larger = max(abs(right), abs(left))
        if larger <= noise:
            continue
        gap = max(abs(right - left) - noise, 0.0) / larger
        gaps.append((eps, gap, right / (two_h / 2.0), left / (two_h / 2.0), ad_change / two_h))
    if not gaps or any(gap <= FD_STABILITY for _, gap, _, _, _ in gaps):
        return None
    largest = max(gaps, key=lambda item: item[0])
    smallest = min(gaps, key=lambda item: item[0])
    if len(gaps) > 1 and smallest[1] < 0.5 * largest[1]:
        return None
    eps, _, right, left, ad = smallest
    low, high = sorted((left, right))
    slack = rtol * max(abs(low), abs(high))
    between = low - slack <= ad <= high + slack
    return (
        f"the objective has a kink at the measured point: its one-sided slopes differ whatever the eps "
        f"(left {left:.6g}, right {right:.6g} at eps {eps:g}) and the gradient's directional derivative "
        f"({ad:.6g}) "
        + ("lies between them, as a valid subgradient does" if between else "lies outside them")
        + ": finite differences cannot judge a gradient at a kink"
    )


# --------------------------------------------------------------------------- results


@dataclass
class RunInfo:
    name: str
    wall_s: float
    status: str
    worker: str | None = None  # with --jobs N / --ray: which worker ran it


@dataclass
class CutResult:
    cut: Cut
    comparison: Comparison


@dataclass
class Result:
    verdict: str
    reason: str | None = None
    measurement: Measurement | None = None
    end_to_end: Comparison | None = None
    objective: float | None = None
    plan: Plan | None = None
    cuts: list[CutResult] = field(default_factory=list)
    first_disagreeing: dict[str, Any] | None = None
    runs: list[RunInfo] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    findings: list[Any] = field(default_factory=list)
    deterministic: bool | None = None  # None: not checked (no probe run got that far)
    jitter: float = 0.0  # |objective difference| of the two unperturbed runs
    seed: int = 0
    rtol: float = DEFAULT_RTOL
    cwd: str | None = None
    # on agree: the error findings this measurement did not exercise, with the read that would
    unexercised: list[tuple[Any, int | None]] = field(default_factory=list)
    samples: list[Result] = field(default_factory=list)  # --at first,mid,last: one result per read
    elapsed_s: float | None = None  # wall time of all runs together (they may overlap: --jobs, --ray)
    where: str = ""  # how the runs were spread ("2 jobs", "a Ray cluster"); "" one after another


def combine(samples: list[Result]) -> Result:
    """One verdict over several reads measured: ``disagree`` when one read disagrees (each
    measurement is sound on its own), ``agree`` when every read agrees, else ``undecided``.
    The reported details are the disagreeing read's (else the first undecided one's, else the
    first read's); every read stays in ``samples``."""
    disagreeing = [s for s in samples if s.verdict == "disagree"]
    undecided = [s for s in samples if s.verdict == "undecided"]
    lead = (disagreeing or undecided or samples)[0]
    out = replace(lead, samples=samples)
    if disagreeing:
        out.verdict, out.reason = "disagree", lead.reason
    elif undecided:
        agreeing = [s for s in samples if s.verdict == "agree"]
        out.verdict = "undecided"
        out.reason = f"{_read_name(lead)}: {lead.reason}" + (
            f" ({', '.join(_read_name(s) for s in agreeing)} agree)" if agreeing else ""
        )
    else:
        out.verdict = "agree"
        # a finding one read did not exercise but another did is covered
        seen: dict[int, tuple[Any, int | None]] = {}
        for sample in samples:
            for finding, later in sample.unexercised:
                seen.setdefault(id(finding), (finding, later))
        exercised = {
            id(f) for s in samples for f in s.findings if all(id(f) != id(g) for g, _ in s.unexercised)
        }
        out.unexercised = [item for key, item in seen.items() if key not in exercised]
    return out


def _read_name(result: Result) -> str:
    chosen = result.measurement
    if chosen is not None and chosen.read is not None:
        return f"read {chosen.read.number}"
    return "a read"
