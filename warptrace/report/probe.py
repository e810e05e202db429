"""Reports of ``gradcheck`` and ``bisect --run``: text for people, JSON for tools (no Warp).

Example (``bisect --run examples/projectile.py``)::

    bisect --run examples/projectile.py: DISAGREE
    parameter  v0 (vec3f[1], allocated at examples/projectile.py:75), perturbed before its first
               read at examples/projectile.py:92 (tape 0, backward 1)
    objective  loss at backward 1 (examples/projectile.py:95) = 6.4 (float32 resolution 6.1e-05)
    deterministic: yes (two unperturbed runs agree bitwise)
    end to end, directional derivative along a fixed random direction (seed ...):
      eps       finite diff     autodiff        rel error
      0.01      -1.1102         -2.22428        5.0e-01
      ...
    cuts (k: verdict, FD vs AD at the middle eps):
      k=1     agree      ...
      k=2     DISAGREE   ...
    first disagreeing cut: k=2 (last agreeing k=1), step 1
      examples/projectile.py:92  wp.launch(integrate, ...)
      findings there: WT101 examples/projectile.py:92
    runs: 9 (record 1.8 s, unperturbed 1.0 s, 1.0 s, perturbed 0.6-1.6 s), 9.9 s in all
"""

from __future__ import annotations

import json
import linecache
from dataclasses import replace
from typing import Any

from warptrace.probe.verdict import Comparison, Result
from warptrace.report.bisect import cut_title
from warptrace.report.text import file_line

EXIT_STATUS = {"agree": 0, "disagree": 1, "undecided": 4}


def _sweep_lines(comparison: Comparison) -> list[str]:
    lines = ["  eps       finite diff     autodiff        rel error"]
    for point in comparison.points:
        error = f"{point.rel_error:.1e}" if point.rel_error is not None else "-"
        if not point.resolved:
            error += "  (below the objective's resolution: not compared)"
        lines.append(f"  {point.eps:<9g} {point.fd:<15.6g} {point.ad:<15.6g} {error}")
    return lines


def render_text(result: Result, command: str) -> str:
    cwd = result.cwd
    lines = [f"{command}: {result.verdict.upper()}"]
    chosen = result.measurement
    if chosen is not None:
        for param in chosen.params:
            role = param.role
            if role is not None:
                where = file_line(role.file, role.line, cwd)
                where += f", allocation {role.ordinal + 1} there" if role.ordinal else ""
            else:
                where = file_line(param.allocation.file, param.allocation.line, cwd)
            lines.append(
                f"parameter  {param.label} ({param.dtype}[{param.size}], allocated at {where}), perturbed before "
                f"its first read at {file_line(param.read_location.file, param.read_location.line, cwd)} "
                f"(tape {next((r.tape_id for r in chosen.window if r.backward == param.backward), '?')}, "
                f"backward {param.backward})"
            )
        if chosen.read is not None:
            at = chosen.read_location
            place = f" at {file_line(at.file, at.line, cwd)}" if at is not None and at.line else ""
            shared = (
                " (memory shared with another framework: read after the backward)"
                if chosen.read.implicit
                else ""
            )
            lines.append(
                f"read       gradient read {chosen.read.number} of {len(chosen.reads)}{place}{shared}"
            )
        if chosen.window:
            backs = ", ".join(
                f"{' + '.join(chosen.terms(r)) or 'nothing'} at backward {r.backward} "
                f"({file_line(r.location.file, r.location.line, cwd)})"
                for r in chosen.window
            )
            value = f" = {result.objective:.7g}" if result.objective is not None else ""
            resolution = (
                f" (float32 resolution {result.end_to_end.resolution:.2g})" if result.end_to_end else ""
            )
            summed = "sum of " if len(chosen.window) > 1 else ""
            lines.append(f"objective  {summed}{backs}{value}{resolution}")
            for seed in chosen.seeds:
                lines.append(
                    f"seed       {seed.label} ({seed.size} values) seeded by {seed.how} at "
                    f"{file_line(seed.location.file, seed.location.line, cwd)}: the seed's values weigh "
                    f"{seed.label} "
                    + (
                        f"(the fill value {seed.constant:g})"
                        if seed.constant is not None
                        else "(those of the first unperturbed run)"
                    )
                )
            if chosen.seeds:
                lines.append(f"measured   {chosen.describe()}")
    if result.deterministic is not None:
        lines.append(
            "deterministic: yes (two unperturbed runs agree bitwise)"
            if result.deterministic
            else f"deterministic: NO (two unperturbed runs differ by {result.jitter:.3g})"
        )
    if result.end_to_end is not None:
        lines.append(
            f"end to end, directional derivative along a fixed random direction (seed {result.seed}, "
            f"tolerance rtol {result.rtol:g} + the objective's resolution):"
        )
        lines += _sweep_lines(result.end_to_end)
    if result.cuts:
        middle = len(result.cuts[0].comparison.points) // 2
        lines.append("cuts in tape order (verdict; finite diff vs autodiff at one eps):")
        for cut_result in result.cuts:
            comparison = cut_result.comparison
            point = comparison.points[middle] if comparison.points else None
            numbers = f"{point.fd:<12.6g} {point.ad:<12.6g} eps {point.eps:g}" if point else ""
            title = cut_title(cut_result.cut, result.plan.steps) if result.plan else ""
            verdict = comparison.verdict if comparison.verdict == "agree" else comparison.verdict.upper()
            lines.append(f"  k={cut_result.cut.k:<5} {verdict:<10} {numbers}  {title}")
    if result.first_disagreeing is not None:
        first = result.first_disagreeing
        step = f", step {first['step']}" if first.get("step") is not None else ""
        lines.append(
            f"first disagreeing cut: k={first['cut']} (last agreeing k={first['last_agreeing_cut']}){step}; "
            "the defect is in the operations between them:"
        )
        for op in first["operations"]:
            text = linecache.getline(op["file"], op["line"]).strip()
            lines.append(
                f"  position {op['position']:<4} {op['kernel']:<18} {file_line(op['file'], op['line'], cwd)}  {text}"
            )
        if first["findings"]:
            named = ", ".join(
                f"{f['code']} {file_line(f['file'], f['line'], cwd)}" for f in first["findings"]
            )
            lines.append(f"  findings there: {named}")
        else:
            lines.append("  no rule finding there: `python -m warptrace analyze` names known patterns only")
    if result.reason:
        lines.append(f"{'undecided' if result.verdict == 'undecided' else 'note'}: {result.reason}")
    if len(result.samples) > 1:
        lines.append("reads measured:")
        for sample in result.samples:
            read = sample.measurement.read if sample.measurement is not None else None
            name = f"read {read.number}" if read is not None else "read ?"
            why = f" ({sample.reason})" if sample.verdict == "undecided" and sample.reason else ""
            lines.append(
                f"  {name:<9} {sample.verdict.upper() if sample.verdict != 'agree' else 'agree'}{why}"
            )
    if result.verdict == "agree" and result.unexercised:
        lines.append("not exercised by this measurement (agree says nothing about them):")
        for finding, later in result.unexercised:
            hint = f"; --at {later} measures it" if later is not None else ""
            lines.append(
                f"  {finding.code} {file_line(finding.location.file, finding.location.line, cwd)}  "
                f"{finding.message}{hint}"
            )
    for note in result.notes:
        lines.append(f"note: {note}")
    if result.runs:
        total = sum(run.wall_s for run in result.runs)
        each = ", ".join(f"{run.name} {run.wall_s:.1f} s" for run in result.runs)
        if result.where and result.elapsed_s:
            # side by side: the runs' own time against the time they took together
            lines.append(
                f"runs: {len(result.runs)} fresh processes, {total:.1f} s in all, {result.elapsed_s:.1f} s "
                f"elapsed with {result.where} ({each})"
            )
        else:
            lines.append(f"runs: {len(result.runs)} fresh processes, {total:.1f} s in all ({each})")
    return "\n".join(lines) + "\n"


def result_dict(result: Result, command: str) -> dict[str, Any]:
    out: dict[str, Any] = {"schema": 1, "command": command, "verdict": result.verdict}
    if result.reason:
        out["reason"] = result.reason
    chosen = result.measurement
    if chosen is not None:
        out["window"] = [
            {
                "backward": r.backward,
                "tape": r.tape_id,
                "loss": r.loss_label if r.loss_array >= 0 else None,
                "file": r.location.file,
                "line": r.location.line,
                "seeds": [
                    {
                        "array": seed.label,
                        "size": seed.size,
                        "how": seed.how,
                        "file": seed.location.file,
                        "line": seed.location.line,
                    }
                    for seed in chosen.seeds
                    if seed.backward == r.backward
                ],
            }
            for r in chosen.window
        ]
        out["parameters"] = [
            {
                "label": p.label,
                "dtype": p.dtype,
                "size": p.size,
                "allocation": {"file": p.allocation.file, "line": p.allocation.line},
                "role": None if p.role is None else p.role.as_json(),
                "first_read": {"file": p.read_location.file, "line": p.read_location.line},
                "backward": p.backward,
                "position": p.position,
                "window": p.window,
            }
            for p in chosen.params
        ]
        if chosen.read is not None:
            at = chosen.read_location
            out["read"] = {
                "number": chosen.read.number,
                "of": len(chosen.reads),
                "file": at.file if at is not None else None,
                "line": at.line if at is not None else None,
                "shared": chosen.read.implicit,
            }
        if chosen.window:
            out["measured"] = chosen.describe()
    out["objective"] = result.objective
    out["deterministic"] = result.deterministic
    out["seed"] = result.seed
    out["rtol"] = result.rtol
    if result.end_to_end is not None:
        out["end_to_end"] = result.end_to_end.to_dict()
    if result.plan is not None:
        out["steps"] = result.plan.steps.describe()
        out["cuts"] = [
            {
                "k": c.cut.k,
                "live": [b.label for b in c.cut.live],
                **c.comparison.to_dict(),
            }
            for c in result.cuts
        ]
        out["first_disagreeing"] = result.first_disagreeing
    out["runs"] = [
        {"name": r.name, "wall_s": round(r.wall_s, 3), "status": r.status, "worker": r.worker}
        for r in result.runs
    ]
    out["elapsed_s"] = round(result.elapsed_s, 3) if result.elapsed_s is not None else None
    out["parallel"] = result.where or None
    out["notes"] = result.notes
    if result.verdict == "agree":
        out["unexercised_findings"] = [
            {
                "code": finding.code,
                "file": finding.location.file,
                "line": finding.location.line,
                "message": finding.message,
                "at": later,
            }
            for finding, later in result.unexercised
        ]
    if len(result.samples) > 1:
        out["samples"] = [result_dict(replace(sample, samples=[]), command) for sample in result.samples]
    return out


def render_json(result: Result, command: str) -> str:
    return json.dumps(result_dict(result, command), indent=2) + "\n"
