"""Text of the gradient health timeline (``show --numerics``; the data comes from
:func:`warptrace.analysis.health.health_timeline`).

One table per ``tape.backward`` call site: a row per backward call with the loss and the
L2 norm of each leaf's gradient, then one trend line per leaf (first and last norm, and
their ratio), so vanishing or exploding gradients over the run stand out. Long series
are folded to their first and last rows unless ``show_all``.
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
        lines.append(
            f"gradient health: backward at {os.path.basename(where['file'])}:{where['line']} "
            f"({len(steps)} step{'s' if len(steps) != 1 else ''}, {tapes} tape{'s' if tapes != 1 else ''})"
        )
        leaves = entry["leaves"]
        header = ["step", "loss", *(f"|grad {leaf}|" for leaf in leaves)]
        rows = [header]
        shown = list(range(len(steps)))
        folded = 0
        if not show_all and len(steps) > 2 * FOLD:
            folded = len(steps) - 2 * FOLD
            shown = [*shown[:FOLD], -1, *shown[-FOLD:]]
        for index in shown:
            if index < 0:
                rows.append([f"... {folded} more", "", *("" for _ in leaves)])
                continue
            step = steps[index]
            cells = [str(step["step"]), _number(step["loss"])]
            for leaf in leaves:
                grad = step["grads"].get(leaf)
                cells.append(_grad(grad))
            rows.append(cells)
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        for row in rows:
            lines.append("  " + "  ".join(cell.rjust(width) for cell, width in zip(row, widths)).rstrip())
        for leaf in leaves:
            norms = [s["grads"][leaf]["l2"] for s in steps if leaf in s["grads"]]
            if len(norms) >= 2:
                lines.append(f"  trend {leaf}: {_trend(norms[0], norms[-1])} over {len(norms)} steps")
        lines.append("")
    return "\n".join(lines)


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
