"""One launch that reads an argument and stores into it in place (WT102, and WT104 for struct fields).

WT102 in-kernel-overwrite
    Summary: a taped launch overwrites in place values its own adjoint needs (`x[i] = f(x[i])`)
    Severity: error (info for an argument native code may overwrite: not checkable)
    Proves:
        One recorded launch reads an argument and stores plain values into it
        (``x[i] = f(x[i])``), directly or inside a ``@wp.func`` it calls, and its adjoint needs
        the values it read: the adjoint re-reads the overwritten values, so branches, products
        and functions of the old value see the new one.
    Mechanism:
        Warp's adjoint kernel re-runs the forward statements to rebuild the values it needs,
        reading the arrays as they are at backward time. After ``x[i] = wp.sin(x[i])`` the
        replay computes ``cos`` of the new value. A linear update needs no old value: Warp's
        store adjoint takes ``adj_x[i]`` and zeroes it, the load adjoint adds the propagated
        value back, so ``x[i] = x[i] + c`` is exact whatever the replay sees. An additive
        update is exact only by itself: the adjoint of any other statement of the kernel that
        read ``x[i]`` before the update also sees the new value, so the question is asked per
        kernel.
    Evidence:
        The launch's access rows show the same argument read and written by a plain store; the
        kernel-source model (stored in the trace) says which statements read and store it, and
        whether any adjoint in the kernel or its callees needs the value the store replaced
        (``kernel_source.linearity``).
    Example: wt102_sin_inplace
    Fix:
        Write the result to a separate output array (``y[i] = wp.sin(x[i])``).
    Silent on:
        ``+=``, ``-=`` and atomics; a kernel that stores first and reads its own result back
        (``y[i] = f(x); h = y[i]``, also inside ``@wp.func`` callees); linear updates
        (``x[i] = x[i] + c``, ``x[i] = 2.0 * x[i]``, a local vector read from ``x[i]``, updated
        through components and ``+=``, and stored back); an in-place clean-up by a kernel that
        carries no gradient. Products with arrays that carry a gradient, divisions by,
        functions of or branches on the values are not linear and stay errors. An array that
        native code (``@wp.func_native`` through a ``wp.ref`` parameter, or handed over whole)
        may read and overwrite is reported as ``info`` naming what could not be checked. An
        in-place ``a[i] *= s`` is WT401.
    Look-alikes: ok_mem_inplace_linear, ok_mem_inplace_slice, ok_mem_write_then_read,
        ok_mem_write_then_read_func, ok_mem_inplace_no_grad, ok_mem_native_ref_store
    Warp documentation:
        "Differentiability", sections "Array Overwrites" and "Array Overwrite Tracking".

When the argument is a ``@wp.struct`` field the finding is WT104 struct-field-overwrite
(documented in :mod:`warptrace.analysis.rules.overwrite_after_read`). Later launches overwriting
what an in-place launch read are not reported again. Findings are grouped by root cause (the
user line to change) with a count.
"""

from __future__ import annotations

import numpy as np

from warptrace.analysis.dataflow import dataflow_of
from warptrace.analysis.findings import Finding, Location, RuleInfo, Severity
from warptrace.analysis.model import Model
from warptrace.analysis.rules.common import DOC_OVERWRITES, Rule, arg_path, quote
from warptrace.analysis.rules.overwrite_after_read import WT104
from warptrace.analysis.rules.overwrite_evidence import (
    Group,
    adjoint_needs_value,
    append_loc,
    buffer_name,
    grad_args_many,
    grouped_finding,
    in_place_rows,
    read_store_rows,
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

# The same rule, for what native code may do: nothing to fix unless a look at the snippet says so.
_WT102_NATIVE = RuleInfo(
    code=WT102.code,
    name=WT102.name,
    family=WT102.family,
    fix="nothing to change when the snippet only stores into the reference (or its adj_snippet does not "
    "need the value it overwrote); otherwise give the result its own output array",
    doc=WT102.doc,
)

_INFOS = {info.code: info for info in (WT102, WT104)}


def _in_kernel_overwrites(model: Model, post_loss: dict[int, tuple[int, int, int]]) -> list[Finding]:
    ev_rows = model.acc_ev
    rows = in_place_rows(model, ev_rows)
    if not len(rows):
        return []
    evs = ev_rows[rows]
    bwd = model.backward_after_many(model.tape[evs], model.seq[evs])
    wt401: dict[tuple[int, str, str], bool] = {}
    candidates = []
    for row, ev, backward in zip(rows.tolist(), evs.tolist(), bwd.tolist()):
        if backward < 0:
            continue  # never backpropagated: the overwrite cannot hurt a gradient
        if ev in post_loss:
            continue  # its adjoint feeds nothing: the root cause is WT105
        if _reported_by_wt401(model, int(model.kernel[ev]), model.acc_arg[row], model.acc_field[row], wt401):
            continue  # `a[i] *= s`: WT401 reports it at the kernel line
        candidates.append((row, ev, backward))
    if not candidates:
        return []
    grads_of = grad_args_many(model, dataflow_of(model), np.asarray([ev for _, ev, _ in candidates]))
    groups: dict[tuple, Group] = {}
    needs: dict[tuple[int, str, str, frozenset[str] | None], bool] = {}
    for row, ev, backward in candidates:
        arg, field_path = model.acc_arg[row], model.acc_field[row]
        kernel_id = int(model.kernel[ev])
        need_key = (kernel_id, arg, field_path, grads_of[ev])
        if need_key not in needs:
            needs[need_key] = adjoint_needs_value(model.kernels.get(kernel_id), arg, field_path, grads_of[ev])
        if not needs[need_key]:
            continue  # the old values are used only linearly: the adjoint never looks at them
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


def _reported_by_wt401(
    model: Model, kernel_id: int, arg: str, field_path: str, cache: dict[tuple[int, str, str], bool]
) -> bool:
    """Whether the kernel's store into the argument is an in-place ``*=``/``/=`` of an array
    element: one root cause, reported once, by WT401 at the kernel line."""
    key = (kernel_id, arg, field_path)
    if key not in cache:
        kernel = model.kernels.get(kernel_id)
        fact = kernel.arg(arg, field_path) if kernel is not None else None
        cache[key] = (
            kernel is not None
            and fact is not None
            and fact.write_line >= 0
            and kernel.source_model.inplace_update_at(fact.write_line)
        )
    return cache[key]


def _native_rows(model: Model, ev_rows: np.ndarray) -> np.ndarray:
    """Access rows of recorded forward launches that native code may have read and
    overwritten: a guess of the recorder (FLAG_UNCERTAIN), never proof of an in-place update."""
    keep = []
    for row in read_store_rows(model, ev_rows, uncertain=True).tolist():
        kernel = model.kernels.get(int(model.kernel[ev_rows[row]]))
        # a kernel whose analysis failed guesses every argument: nothing specific to say
        if kernel is not None and kernel.native_snippets and not kernel.analysis.startswith("failed"):
            keep.append(row)
    return np.asarray(keep, dtype=np.int64)


def _unchecked_native(model: Model, post_loss: dict[int, tuple[int, int, int]]) -> list[Finding]:
    """Info: an argument native code may read and overwrite in one launch; not checkable."""
    ev_rows = model.acc_ev
    rows = _native_rows(model, ev_rows)
    if not len(rows):
        return []
    evs = ev_rows[rows]
    bwd = model.backward_after_many(model.tape[evs], model.seq[evs])
    groups: dict[tuple, Group] = {}
    for row, ev, backward in zip(rows.tolist(), evs.tolist(), bwd.tolist()):
        if backward < 0 or ev in post_loss:
            continue
        key = (int(model.site[ev]), int(model.kernel[ev]), model.acc_arg[row], model.acc_field[row])
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group("WT102", Severity.INFO, (row, ev))
        seq = int(model.seq[ev])
        group.add(Severity.INFO, seq, seq, (int(model.acc_array[row]),), int(model.acc_alloc[row]))
    findings = []
    for key, group in groups.items():
        row, ev = group.first
        arg, field_path = model.acc_arg[row], model.acc_field[row]
        path = quote(arg_path(arg, field_path))
        buffer = buffer_name(model, int(model.acc_array[row]), arg)
        subject = buffer if buffer == path else f"{buffer} (argument {path})"
        message = (
            f"kernel {quote(model.kernel_name(ev))} hands {subject} to native code (@wp.func_native, by "
            "reference or as a whole array) that may read and overwrite it; warptrace cannot see the "
            "C++ body, so whether the adjoint re-reads overwritten values was not checked"
        )
        related: list[Location] = []
        kernel_id = int(model.kernel[ev])
        fact = model.kernels[kernel_id].arg(arg, field_path) if kernel_id in model.kernels else None
        if fact is not None:
            append_loc(related, model.kernel_line(kernel_id, fact.write_line, "native call"))
        findings.append(
            grouped_finding(
                _WT102_NATIVE, group, message, model.event_location(ev, "launch"), related, ("native", *key)
            )
        )
    return findings


def check(model: Model) -> list[Finding]:
    post_loss = post_loss_launches(model)
    return _in_kernel_overwrites(model, post_loss) + _unchecked_native(model, post_loss)


RULE = Rule((WT102, WT104), check)
