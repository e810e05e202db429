"""Text of the gradient health timeline (``show --numerics``; the data comes from
:func:`warptrace.analysis.health.health_timeline`).

One table per ``tape.backward`` call site: a row per backward call with the loss, the L2
norm of each leaf's gradient and of its values, then one trend line per leaf (first and
last gradient norm, and their ratio), so vanishing or exploding gradients over the run
stand out. A series that diverged (WT505) marks the step where growth began, where the
step size went above 2/L, and the first non-finite value, and ends with one line saying so.
Long series are folded to their first and last rows (and the marked ones) unless
``show_all``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

__all__ = ["render_health"]

FOLD = 10  # rows kept at each end of a long series


def render_health(series: Sequence[dict[str, Any]], *, has_numerics: bool, show_all: bool = False) -> str:
    if not has_numerics:
        return "gradient health: this trace holds no value summaries (record it with --check-numerics)\n"
    if not series:
        return "gradient health: no backward call with summaries in this trace\n"
    lines: list[str] = []
    for entry in series:
        where = entry["backward"]
        steps = entry["steps"]
        tapes = len(entry["tapes"])
        diverged = entry.get("divergence")
        lines.append(
            f"gradient health: backward at {os.path.basename(where['file'])}:{where['line']} "
            f"({len(steps)} step{'s' if len(steps) != 1 else ''}, {tapes} tape{'s' if tapes != 1 else ''})"
        )
        leaves = entry["leaves"]
        params = [leaf for leaf in leaves if any(leaf in s.get("params", {}) for s in steps)]
        header = ["step", "loss", *(f"|grad {leaf}|" for leaf in leaves), *(f"|{leaf}|" for leaf in params)]
        marks = _marks(diverged)
        if marks:
            header.append("")
        rows = [header]
        for index in _shown(len(steps), show_all, marks):
            if index < 0:
                rows.append([f"... {-index} more", "", *("" for _ in header[2:])])
                continue
            step = steps[index]
            cells = [str(step["step"]), _loss(step)]
            cells += [_grad(step["grads"].get(leaf)) for leaf in leaves]
            cells += [_param(step.get("params", {}).get(leaf)) for leaf in params]
            if marks:
                cells.append(marks.get(index, ""))
            rows.append(cells)
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        for row in rows:
            lines.append("  " + "  ".join(cell.rjust(width) for cell, width in zip(row, widths)).rstrip())
        for leaf in leaves:
            norms = [s["grads"][leaf]["l2"] for s in steps if leaf in s["grads"]]
            if len(norms) >= 2:
                lines.append(f"  trend {leaf}: {_trend(norms[0], norms[-1])} over {len(norms)} steps")
        if diverged:
            lines.append("  " + _divergence(diverged))
        lines.append("")
    return "\n".join(lines)


def _marks(diverged: dict[str, Any] | None) -> dict[int, str]:
    """step -> what the divergence verdict says of it (growth start, curvature, non-finite)."""
    if not diverged:
        return {}
    marks = {int(diverged["start_step"]): "<- growth begins (divergence, WT505)"}
    curvature = diverged.get("curvature")
    if curvature and int(curvature["from_step"]) not in marks:
        marks[int(curvature["from_step"])] = "<- step size above 2/L from here"
    marks[int(diverged["nonfinite_step"])] = "<- first non-finite value"
    return marks


def _shown(count: int, show_all: bool, marks: dict[int, str]) -> list[int]:
    """Step indexes to print (a negative entry: that many folded), the marked ones always kept."""
    if show_all or count <= 2 * FOLD:
        return list(range(count))
    keep = set(range(FOLD)) | set(range(count - FOLD, count))
    for step in marks:
        keep |= {s for s in range(step - 2, step + 3) if 0 <= s < count}
    shown: list[int] = []
    previous = -1
    for index in sorted(keep):
        if index > previous + 1:
            shown.append(-(index - previous - 1))
        shown.append(index)
        previous = index
    return shown


def _divergence(diverged: dict[str, Any]) -> str:
    text = (
        f"divergence: the {diverged['quantity']} grew from {diverged['from']:.3g} at step {diverged['start_step']} "
        f"to {diverged['to']:.3g} at step {diverged['last_finite_step']}; the first non-finite value comes "
        f"at step {diverged['nonfinite_step']}"
    )
    curvature = diverged.get("curvature")
    if curvature:
        text += (
            f"; step size {curvature['step_size']:.3g} above 2/L = {curvature['limit']:.3g} from step "
            f"{curvature['from_step']}"
        )
    return text + " (see WT505)"


def _loss(step: dict[str, Any]) -> str:
    if step["loss"] is None:
        return "nan/inf" if step.get("loss_nonfinite", True) else "-"
    return _number(step["loss"])


def _param(param: dict[str, Any] | None) -> str:
    if param is None:
        return "-"
    if param["nonfinite"]:
        return f"{param['nonfinite']} nan/inf"
    return f"{param['l2']:.4g}"


def _number(value: float | None) -> str:
    return "nan/inf" if value is None else f"{value:.4g}"


def _grad(grad: dict[str, Any] | None) -> str:
    if grad is None:
        return "-"
    if grad["nonfinite"]:
        return f"{grad['nonfinite']} nan/inf"
    if grad["zero"]:
        return "0 (exact)"
    return f"{grad['l2']:.4g}"


def _trend(first: float, last: float) -> str:
    if first > 0 and last > 0:
        ratio = last / first
        word = "vanishing" if ratio < 1e-3 else "exploding" if ratio > 1e3 else "steady"
        return f"{first:.3g} -> {last:.3g} (x{ratio:.3g}, {word})"
    return f"{first:.3g} -> {last:.3g}"
