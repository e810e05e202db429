"""WT102 in-kernel-overwrite (error).

One recorded launch reads an argument and stores plain values into it
(``x[i] = f(x[i])``), directly or inside a ``@wp.func`` it calls. The adjoint
re-reads the overwritten values. ``+=`` and atomics are exempt, and so is a kernel
that stores first and reads its own result back (``y[i] = f(x); h = y[i]``).
Later launches overwriting what an in-place launch read are not reported again.
Fix: write the result to a separate output array.

When the argument is a ``@wp.struct`` field the finding is WT104 struct-field-overwrite
(see :mod:`warptrace.analysis.rules.overwrite_after_read`).

Warp documentation: "Differentiability", sections "Array Overwrites" and "Array
Overwrite Tracking".

Findings are grouped by root cause (the user line to change) with a count.
"""

from __future__ import annotations

from warptrace.analysis.findings import Finding, Location, RuleInfo, Severity
from warptrace.analysis.model import Model
from warptrace.analysis.rules.common import DOC_OVERWRITES, Rule, arg_path, quote
from warptrace.analysis.rules.overwrite_after_read import WT104
from warptrace.analysis.rules.overwrite_evidence import (
    Group,
    append_loc,
    buffer_name,
    grouped_finding,
    in_place_rows,
    site_line,
)
from warptrace.analysis.rules.post_loss import post_loss_launches
from warptrace.trace import schema as S

WT102 = RuleInfo(
    code="WT102",
    name="in-kernel-overwrite",
    family="memory",
    fix="store the result into a separate output array instead of updating the input in place "
    "(x_out[i] = f(x_in[i])); += and wp.atomic_add are safe",
    doc=DOC_OVERWRITES,
)

_INFOS = {info.code: info for info in (WT102, WT104)}


def _in_kernel_overwrites(model: Model, post_loss: dict[int, tuple[int, int, int]]) -> list[Finding]:
    ev_rows = model.acc_ev
    rows = in_place_rows(model, ev_rows)
    if not len(rows):
        return []
    evs = ev_rows[rows]
    bwd = model.backward_after_many(model.tape[evs], model.seq[evs])
    groups: dict[tuple, Group] = {}
    for row, ev, backward in zip(rows.tolist(), evs.tolist(), bwd.tolist()):
        if backward < 0:
            continue  # never backpropagated: the overwrite cannot hurt a gradient
        if ev in post_loss:
            continue  # its adjoint feeds nothing: the root cause is WT105
        arg, field_path = model.acc_arg[row], model.acc_field[row]
        code = "WT104" if field_path or (model.acc_flags[row] & S.FLAG_FIELD) else "WT102"
        key = (int(model.site[ev]), int(model.kernel[ev]), arg, field_path)
        group = groups.get((code, *key))
        if group is None:
            group = groups[(code, *key)] = Group(code, Severity.ERROR, (row, ev, backward))
        seq = int(model.seq[ev])
        group.add(Severity.ERROR, seq, seq, (int(model.acc_array[row]),), int(model.acc_alloc[row]))

    findings = []
    for (code, *key_parts), group in groups.items():
        group_key = tuple(key_parts)
        row, ev, backward = group.first
        arg, field_path = model.acc_arg[row], model.acc_field[row]
        kernel_id = int(model.kernel[ev])
        array_id = int(model.acc_array[row])
        kernel = model.kernel_name(ev)
        buffer = buffer_name(model, array_id, arg)
        backward_ev = model.ev_of_seq(backward)
        path = quote(arg_path(arg, field_path))
        if code == "WT104":
            subject = f"struct field {path}" + ("" if buffer == path else f" ({buffer})")
        else:
            subject = buffer if buffer == path else f"{buffer} (argument {path})"
        message = (
            f"kernel {quote(kernel)} reads {subject} and stores into it in the same launch, so the adjoint "
            f"run by tape.backward() at {site_line(model, int(model.site[backward_ev]))} re-reads the "
            "overwritten values instead of the ones the forward pass used"
        )
        related: list[Location] = []
        fact = model.kernels[kernel_id].arg(arg, field_path) if kernel_id in model.kernels else None
        if fact is not None:
            append_loc(related, model.kernel_line(kernel_id, fact.write_line, "store"))
            append_loc(related, model.kernel_line(kernel_id, fact.read_line, "read"))
        append_loc(related, model.event_location(backward_ev, "backward"))
        findings.append(
            grouped_finding(
                _INFOS[code],
                group,
                message,
                model.event_location(ev, "in-place launch"),
                related,
                group_key,
                field=arg_path(arg, field_path) if code == "WT104" else "",
            )
        )
    return findings


def check(model: Model) -> list[Finding]:
    return _in_kernel_overwrites(model, post_loss_launches(model))


RULE = Rule((WT102, WT104), check)
