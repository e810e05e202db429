"""One launch that reads an element and stores into it in place (WT102, and WT104 for struct fields).

Per element: the same element means the same index value in the same thread (the same index
expression over the same values, or the same local); the walk is
:mod:`warptrace.kernel_source.element_walk`, the answers :mod:`warptrace.kernel_source.elements`.

WT102 in-kernel-overwrite
    Summary: a taped launch overwrites in place an element an adjoint of the same kernel needs
    Severity: error (info when not proven: other elements of the array, native code)
    Proves:
        One recorded launch reads an element of an argument and later, in the same thread,
        writes that same element, directly or inside a ``@wp.func`` it calls, while an adjoint
        of the kernel needs the value read. Two shapes: a plain store (``x[i] = f(x[i])``, a
        clamp, a normalization in place); and an additive update (``x[i] += c``,
        ``wp.atomic_add(x, i, c)``) after another statement read ``x[i]``: exact by itself, but
        the other statement's adjoint sees the updated value (verified on Warp 1.19:
        ``loss[0] = y[1] * b[0]; b[0] += 100.0`` gives ``y.grad[1] = 110`` instead of ``10``).
        The question is asked per kernel, not per statement.
    Mechanism:
        Warp's adjoint re-reads array elements from memory after every thread finished (loads
        are replayed, stores are not), so the statement that read the element sees the new
        value in the adjoint. It matters only where an adjoint needs the value read: a product
        with something that carries a gradient, a division, a function of it, a branch or an
        index.
    Evidence:
        The launch's access rows show the same argument read and written; the kernel-source
        model (stored in the trace) says, per load, which element each statement reads and
        stores (index expressions numbered over their values, ``@wp.func`` callees inlined) and
        whether any adjoint in the kernel needs the value a later store replaced.
    Example: wt102_sin_inplace
    Fix:
        Write the result to a separate output array (``y[i] = wp.sin(x[i])``); for an additive
        update another statement reads first, update after the last use or into another array.
    Silent on:
        ``x[i] = x[i] + c``, ``x[i] = 2.0 * x[i]``, ``q[i] += dt * v[i]`` and a value read only
        linearly before an update; a kernel that stores first and reads its own result back
        (``y[i] = f(x); h = y[i]``, also inside ``@wp.func`` callees); an update before the read;
        a read and a write of different constant elements (``b[0]``, ``b[1]``); an in-place
        clean-up by a kernel that carries no gradient. A read and a write of *other* elements of
        one array (a tree walk reading the parent's entry and writing the child's, as Newton's
        Featherstone kernels do; a gather; a scatter; a write in a later iteration of the loop
        that read) is not proven: ``info`` at most. A function with a ``@wp.func_grad`` is not
        differentiated by Warp: its custom adjoint reads the arrays as the call leaves them, by
        design. An array that native code (``@wp.func_native`` through a ``wp.ref`` parameter,
        or handed over whole) may read and overwrite is ``info`` naming what could not be
        checked. An in-place ``a[i] *= s`` is WT401.
    Look-alikes: ok_mem_inplace_linear, ok_mem_inplace_slice, ok_mem_write_then_read,
        ok_mem_write_then_read_func, ok_mem_inplace_no_grad, ok_mem_native_ref_store,
        ok_mem_tree_gather_scatter, ok_mem_update_order, ok_mem_custom_adjoint_inplace
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
from warptrace.analysis.model import KernelInfo, Model
from warptrace.analysis.rules.common import DOC_OVERWRITES, Rule, arg_path, quote
from warptrace.analysis.rules.overwrite_after_read import WT104
from warptrace.analysis.rules.overwrite_evidence import (
    Group,
    adjoint_needs_value,
    append_loc,
    buffer_name,
    grad_args_many,
    grouped_finding,
    kernel_arg_fact,
    read_store_rows,
    site_line,
    store_after_read,
)
from warptrace.analysis.rules.post_loss import post_loss_launches
from warptrace.kernel_source.elements import NONE, PROVEN, Overwrite
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

# The same rules, for writes warptrace cannot prove to hit the elements read.
_POSSIBLE = {
    info.code: RuleInfo(
        code=info.code,
        name=info.name,
        family=info.family,
        fix="nothing to change when each element is written before any thread reads it, or never after "
        "(a tree walk from the root, disjoint gathers and scatters); otherwise write to a separate array",
        doc=info.doc,
    )
    for info in (WT102, WT104)
}


def _candidate_rows(model: Model, ev_rows: np.ndarray) -> np.ndarray:
    """Access rows of recorded forward launches that read an array and store into it or update
    it additively (``+=``, atomics), which the kernel facts do not rule out."""
    rows = read_store_rows(model, ev_rows, uncertain=False, writes=S.FLAG_STORE | S.FLAG_ACCUMULATE)
    keep = []
    for row in rows.tolist():
        kernel_id = int(model.kernel[ev_rows[row]])
        arg, field_path = model.acc_arg[row], model.acc_field[row]
        if kernel_arg_fact(model, kernel_id, arg, field_path, "read") is False:
            continue
        keep.append(row)
    return np.asarray(keep, dtype=np.int64)


def _verdict(
    kernel: KernelInfo | None, arg: str, field_path: str, grad_args: frozenset[str] | None, store: bool
) -> Overwrite | None:
    """What the kernel source proves about the elements of ``arg[.field]`` one thread reads and
    then writes (:meth:`~warptrace.kernel_source.KernelSource.overwrite`); None when nothing is
    to report. Without the source, a plain store after a read whose values the adjoint may need
    is reported as before (a proven overwrite); an additive update is not."""
    if grad_args is not None and not grad_args:
        return None  # no argument carries a gradient: the adjoint propagates nothing
    path = arg_path(arg, field_path)
    if kernel is not None and kernel.source:
        array_params = frozenset(a.name for a in kernel.args if a.is_array or a.field)
        active = array_params if grad_args is None else grad_args
        found = kernel.source_model.overwrite(path, active)
        if found is not None:
            return found if found.kind != NONE else None
    if (
        store
        and store_after_read(kernel, arg, field_path)
        and adjoint_needs_value(kernel, arg, field_path, grad_args)
    ):
        return Overwrite(PROVEN)
    return None


def _in_kernel_overwrites(model: Model, post_loss: dict[int, tuple[int, int, int]]) -> list[Finding]:
    ev_rows = model.acc_ev
    rows = _candidate_rows(model, ev_rows)
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
    verdicts: dict[tuple, Overwrite | None] = {}
    found_by_group: dict[tuple, Overwrite] = {}
    for row, ev, backward in candidates:
        arg, field_path = model.acc_arg[row], model.acc_field[row]
        kernel_id = int(model.kernel[ev])
        store = bool(model.acc_flags[row] & S.FLAG_STORE)
        verdict_key = (kernel_id, arg, field_path, grads_of[ev], store)
        if verdict_key not in verdicts:
            verdicts[verdict_key] = _verdict(
                model.kernels.get(kernel_id), arg, field_path, grads_of[ev], store
            )
        verdict = verdicts[verdict_key]
        if verdict is None:
            continue  # the values read are used only linearly, or never written after the read
        severity = Severity.ERROR if verdict.kind == PROVEN else Severity.INFO
        code = "WT104" if field_path or (model.acc_flags[row] & S.FLAG_FIELD) else "WT102"
        key = (code, int(model.site[ev]), kernel_id, arg, field_path)
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group(code, severity, (row, ev, backward))
        if verdict.kind >= found_by_group.get(key, Overwrite()).kind:
            if verdict.kind > found_by_group.get(key, Overwrite()).kind:
                group.first = (row, ev, backward)
            found_by_group[key] = verdict
        seq = int(model.seq[ev])
        group.add(severity, seq, seq, (int(model.acc_array[row]),), int(model.acc_alloc[row]))

    findings = []
    for (code, *key_parts), group in groups.items():
        verdict = found_by_group[(code, *key_parts)]
        findings.append(_finding(model, code, group, verdict, tuple(key_parts)))
    return findings


def _finding(model: Model, code: str, group: Group, verdict: Overwrite, group_key: tuple) -> Finding:
    row, ev, backward = group.first
    arg, field_path = model.acc_arg[row], model.acc_field[row]
    kernel_id = int(model.kernel[ev])
    kernel = model.kernel_name(ev)
    buffer = buffer_name(model, int(model.acc_array[row]), arg)
    backward_ev = model.ev_of_seq(backward)
    backward_at = site_line(model, int(model.site[backward_ev]))
    path = quote(arg_path(arg, field_path))
    if code == "WT104":
        subject = f"struct field {path}" + ("" if buffer == path else f" ({buffer})")
    else:
        subject = buffer if buffer == path else f"{buffer} (argument {path})"
    read_at = f" at line {verdict.read_line}" if verdict.read_line > 0 else ""
    write_at = f" at line {verdict.write_line}" if verdict.write_line > 0 else ""
    if verdict.kind == PROVEN and verdict.additive:
        message = (
            f"kernel {quote(kernel)} reads an element of {subject}{read_at} and later adds to the same "
            f"element{write_at}: the update is exact by itself, but the adjoint run by tape.backward() at "
            f"{backward_at} re-reads the updated value where the statement that read it needs the one the "
            "forward pass used"
        )
    elif verdict.kind == PROVEN:
        message = (
            f"kernel {quote(kernel)} reads an element of {subject}{read_at} and stores into the same "
            f"element{write_at} in the same launch, so the adjoint run by tape.backward() at {backward_at} "
            "re-reads the overwritten value instead of the one the forward pass used"
        )
    else:
        message = (
            f"kernel {quote(kernel)} reads {subject}{read_at} and writes it{write_at} in the same launch, "
            "at elements warptrace cannot prove to be the same or different (a tree walk reading the "
            "parent's entry and writing the child's, a gather, a scatter, a later loop iteration); if "
            "a write can reach an element read before it, the adjoint run by tape.backward() at "
            f"{backward_at} re-reads the new value. Not checked"
        )
    related: list[Location] = []
    if verdict.write_line > 0:
        append_loc(
            related, Location(verdict.write_file, verdict.write_line, "write", "", verdict.write_function)
        )
        append_loc(related, Location(verdict.read_file, verdict.read_line, "read", "", verdict.read_function))
    else:
        fact = model.kernels[kernel_id].arg(arg, field_path) if kernel_id in model.kernels else None
        if fact is not None:
            append_loc(related, model.kernel_line(kernel_id, fact.write_line, "store"))
            append_loc(related, model.kernel_line(kernel_id, fact.read_line, "read"))
    append_loc(related, model.event_location(backward_ev, "backward"))
    info = _INFOS[code] if verdict.kind == PROVEN else _POSSIBLE[code]
    return grouped_finding(
        info,
        group,
        message,
        model.event_location(ev, "in-place launch"),
        related,
        group_key,
        field=arg_path(arg, field_path) if code == "WT104" else "",
    )


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
