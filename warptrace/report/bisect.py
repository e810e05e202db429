"""``warptrace bisect TRACE``: the bisection plan as text a person can follow by hand, or JSON.

Example::

    bisect plan: tape 0, backward 1 at projectile.py:95 (loss), 17 operations
    steps: 1 operation x 16 steps, then 1 after the last
    perturb (differentiable leaves read on the tape, never written there):
      v0      vec3f[1]  allocated at projectile.py:75, first read at position 0 projectile.py:92
    cuts, binary-search order (cut k sits between operations k-1 and k; near findings first):
      k=8    before step 8   near WT101
             live: v_a (projectile.py:80), q_b (projectile.py:81), v_b (projectile.py:82)
      ...

No Warp needed; :mod:`warptrace.analysis.bisect` makes the plan.
"""

from __future__ import annotations

import json
from typing import Any

from warptrace.analysis.bisect import Cut, Plan, Steps
from warptrace.report.text import file_line

TEXT_CUTS = 24
TEXT_OPERATIONS = 40


def cut_title(cut: Cut, steps: Steps) -> str:
    if steps.count < 2:
        return ""
    if cut.step is not None:
        return "after the last step" if cut.step >= steps.count else f"before step {cut.step}"
    if cut.inside_step is not None:
        return f"inside step {cut.inside_step}"
    return "outside the repeated steps"


def render_text(plan: Plan, cwd: str | None = None, show_all: bool = False) -> str:
    recording = plan.recording
    lines = [
        f"bisect plan: tape {recording.tape_id}, backward {recording.backward} at "
        f"{file_line(recording.location.file, recording.location.line, cwd)}"
        f"{f' ({recording.loss_label})' if recording.loss_label else ''}, {len(recording.events)} operations",
        f"steps: {plan.steps.describe()}",
    ]
    if not recording.executed:
        lines.append("note: this backward runs inside a captured graph; a probe run cannot cut or perturb it")
    lines.append("perturb (differentiable leaves read on the tape, never written there):")
    if not plan.leaves:
        lines.append("  none: no array with requires_grad is only read on this tape")
    width = max((len(leaf.label) for leaf in plan.leaves), default=0)
    for leaf in plan.leaves:
        reader = plan.operations[leaf.first_position]
        lines.append(
            f"  {leaf.label.ljust(width)}  {leaf.dtype}[{leaf.size}]  allocated at "
            f"{file_line(leaf.allocation.file, leaf.allocation.line, cwd)}, first read at position "
            f"{leaf.first_position} {file_line(reader['file'], reader['line'], cwd)}"
        )
    lines.append(
        "cuts, binary-search order (cut k sits between operations k-1 and k; cuts next to findings first):"
    )
    shown = plan.cuts if show_all else plan.cuts[:TEXT_CUTS]
    for cut in shown:
        near = f"   near {', '.join(cut.near_findings)}" if cut.near_findings else ""
        lines.append(f"  k={cut.k:<5} {cut_title(cut, plan.steps)}{near}")
        if cut.live:
            live = ", ".join(
                f"{b.label} ({file_line(b.allocation.file, b.allocation.line, cwd)})" for b in cut.live
            )
            lines.append(f"         live: {live}")
        else:
            lines.append("         live: nothing (no surrogate here)")
        if cut.upstream and cut.upstream != [leaf.label for leaf in plan.leaves]:
            lines.append(f"         perturb: {', '.join(cut.upstream)}")
    if len(shown) < len(plan.cuts):
        lines.append(f"  ... {len(plan.cuts) - len(shown)} more cuts (--all, or --format json)")
    lines.append("operations (position, kernel, user line, step):")
    operations: list[dict[str, Any] | None] = list(plan.operations) if show_all else _fold(plan.operations)
    for op in operations:
        if op is None:
            lines.append("  ...")
            continue
        step = f"  step {op['step']}" if op["step"] is not None else ""
        lines.append(
            f"  {op['position']:<5} {op['kernel']:<20} {file_line(op['file'], op['line'], cwd)}{step}"
        )
    lines += [
        "",
        "by hand: at cut k, take S = sum(w * b) over the live buffers b (w fixed random weights).",
        "  AD: seed b.grad = w, backpropagate only operations 0..k-1 (tape.launches[:k]), read param.grad . d.",
        "  FD: rerun with param +/- h*d just before its first read, read S at the cut, (S+ - S-) / 2h.",
        "  The first cut where they disagree brackets the defect after the last cut that agrees.",
        "`python -m warptrace bisect --run SCRIPT.py` does all of this.",
    ]
    return "\n".join(lines) + "\n"


def _fold(operations: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    if len(operations) <= TEXT_OPERATIONS:
        return list(operations)
    half = TEXT_OPERATIONS // 2
    return [*operations[:half], None, *operations[-half:]]


def plan_dict(plan: Plan) -> dict[str, Any]:
    recording = plan.recording
    return {
        "tape": recording.tape_id,
        "backward": recording.backward,
        "backward_location": {"file": recording.location.file, "line": recording.location.line},
        "loss": recording.loss_label,
        "executed": recording.executed,
        "operations": plan.operations,
        "steps": {
            "prefix": plan.steps.prefix,
            "period": plan.steps.period,
            "count": plan.steps.count,
            "description": plan.steps.describe(),
        },
        "leaves": [
            {
                "label": leaf.label,
                "dtype": leaf.dtype,
                "size": leaf.size,
                "allocation": {"file": leaf.allocation.file, "line": leaf.allocation.line},
                "first_position": leaf.first_position,
            }
            for leaf in plan.leaves
        ],
        "cuts": [cut.to_dict() for cut in plan.cuts],
    }


def render_json(plan: Plan) -> str:
    return json.dumps({"schema": 1, "plan": plan_dict(plan)}, indent=2) + "\n"
