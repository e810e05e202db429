"""The first launch that wrote NaN or inf from finite inputs (WT501).

WT501 nonfinite-origin
    Summary: the first launch, forward or adjoint, that wrote NaN or inf from finite inputs
    Severity: error (traces recorded with ``--check-numerics`` only)
    Proves:
        The first launch, forward or adjoint, that wrote a NaN or an infinity while everything
        it read was finite *and moderate*: the origin of the non-finite values, not one of the
        arrays they poisoned downstream. A launch whose inputs were already huge (float32
        overflow territory, or far beyond their magnitude at the same line's earlier launches:
        see :mod:`warptrace.analysis.overflow`) overflowed at the end of a growth that started
        elsewhere; it is innocent, and WT505 (divergence) tells that story instead. The finding
        names the kernel, the argument and the first bad element, at the launch's line; for an
        adjoint launch, at the line of the forward launch it differentiates (the kernel to
        fix), with the ``tape.backward`` line as related.
    Mechanism:
        ``wp.sqrt``/``wp.log``/``wp.acos`` or a division at the edge of their domain. In the
        adjoint only: ``wp.sqrt(x)`` at ``x == 0`` (the derivative is infinite), or
        ``wp.where(c, f(x), 0.0)`` where the unselected ``f(x)`` is NaN: the forward discards
        it, but its adjoint multiplies the zero incoming gradient by a NaN derivative.
    Evidence:
        The ``numerics`` table: after every executed launch, copy and memset, a summary of each
        array it wrote (element count, non-finite count, first non-finite index, min, max, L2
        norm), so the first write of a non-finite value from finite inputs is found without
        storing any values.
    Example: wt501_where_branch
    Fix:
        Keep the argument inside the function's domain on *both* branches
        (``wp.sqrt(wp.max(x, eps))``; select the input rather than the output).
    Silent on:
        Launches downstream of an origin (they read a non-finite input); an overflow whose
        inputs were already huge or had grown far beyond their history (WT505); a NaN used as a
        sentinel outside differentiation (a forward launch is reported only when it is recorded
        on a tape that is backpropagated). Without ``--check-numerics`` the rule is silent.
    Look-alikes: ok_num_nan_sentinel
    Warp documentation:
        "Differentiability", section "Debugging Gradients".
"""

from __future__ import annotations

from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import K, Model
from warptrace.analysis.numerics import NumericsTable, numerics_of
from warptrace.analysis.overflow import input_scale
from warptrace.analysis.rules.common import DOC_DEBUG, Rule, access_rows, finding, quote
from warptrace.trace import schema as S

WT501 = RuleInfo(
    code="WT501",
    name="nonfinite-origin",
    family="numeric",
    fix="keep the arguments of sqrt/log/division inside their domain on every branch "
    "(wp.sqrt(wp.max(x, eps)); select the input, not the output, with wp.where)",
    doc=DOC_DEBUG,
)


def check(model: Model) -> list[Finding]:
    table = numerics_of(model)
    if table is None:
        return []
    findings = []
    bad_seqs = sorted({row.seq for row in table.rows if row.what == S.NUM_WRITE and row.nonfinite})
    for seq in bad_seqs:
        try:
            ev = model.ev_of_seq(seq)
        except KeyError:
            continue
        if model.kind[ev] != K[S.LAUNCH] or not model.executed[ev]:
            continue
        adjoint = bool(model.adjoint[ev])
        if not adjoint and model.backward_after(int(model.tape[ev]), seq) is None:
            continue  # not differentiated: a NaN sentinel is the program's business
        if not adjoint and not model.recorded[ev]:
            continue
        if not _inputs_finite(model, table, ev, seq):
            continue
        if not _inputs_moderate(model, table, ev, seq):
            continue  # an overflow of values that were already huge: a divergence (WT505), not a domain error
        findings.append(_origin(model, table, ev, seq, adjoint))
    return findings


def _inputs_finite(model: Model, table: NumericsTable, ev: int, seq: int) -> bool:
    """Everything the launch read was finite: its read-only inputs (summarized with it) and,
    for the arrays it wrote but also read or accumulated into, their state before it."""
    rows = table.by_seq.get(seq, [])
    if any(row.what == S.NUM_INPUT and row.nonfinite for row in rows):
        return False
    read_written = set()
    for acc in access_rows(model, ev):
        if model.acc_role[acc] & S.ROLE_WRITE and (
            model.acc_role[acc] & S.ROLE_READ or model.acc_flags[acc] & S.FLAG_ACCUMULATE
        ):
            read_written.add(int(model.acc_array[acc]))
    for row in rows:
        if row.what == S.NUM_WRITE and row.array_id in read_written:
            previous = table.before(row.array_id, seq)
            if previous is not None and previous.nonfinite:
                return False
    return True


def _inputs_moderate(model: Model, table: NumericsTable, ev: int, seq: int) -> bool:
    """What the launch read was moderate (:mod:`warptrace.analysis.overflow`): neither in
    float overflow territory nor grown far beyond its magnitude at the launch's earlier calls."""
    bad = next(row for row in table.by_seq[seq] if row.what == S.NUM_WRITE and row.nonfinite)
    info = model.arrays.get(bad.array_id)
    return input_scale(model, table, ev, seq, info.dtype if info is not None else "float32").moderate


def _origin(model: Model, table: NumericsTable, ev: int, seq: int, adjoint: bool) -> Finding:
    bad = next(row for row in table.by_seq[seq] if row.what == S.NUM_WRITE and row.nonfinite)
    kernel = model.kernel_name(ev)
    arg = f"{bad.arg}.{bad.field}" if bad.field else bad.arg
    target = model.array_label(bad.array_id, arg)
    what = f"{bad.nonfinite} non-finite of {bad.count} values, the first at element {bad.first_bad}"
    related = []
    forward = _forward_launch(model, ev) if adjoint else None
    if adjoint:
        where = (
            model.event_location(forward, "forward launch")
            if forward is not None
            else model.event_location(ev)
        )
        related.append(model.event_location(ev, "backward"))
        message = (
            f"the adjoint of kernel {quote(kernel)} wrote {what} into {quote(target)} (the gradient of "
            f"argument {quote(arg)}) although every value it read was finite: the forward launch"
            f"{'' if forward is None else f' at line {where.line}'} is the origin of the non-finite gradient"
        )
    else:
        where = model.event_location(ev, "launch")
        message = (
            f"kernel {quote(kernel)} wrote {what} into {quote(target)} (argument {quote(arg)}) although every "
            "value it read was finite: the first non-finite value of the run on the way to the gradient starts here"
        )
    return finding(
        WT501,
        Severity.ERROR,
        message,
        where,
        related=related,
        evidence={
            "first_seq": seq,
            "kernel": kernel,
            "arg": arg,
            "array_id": bad.array_id,
            "first_bad": bad.first_bad,
            "nonfinite": bad.nonfinite,
            "adjoint": adjoint,
            "forward_seq": int(model.seq[forward]) if forward is not None else -1,
        },
        key=(int(model.kernel[ev]), arg, adjoint, where.file, where.line),
    )


def _forward_launch(model: Model, ev: int) -> int | None:
    """The recorded forward launch an adjoint launch differentiates: the latest one of the
    same kernel on the same tape before the backward, reading the same arrays."""
    kernel, tape = int(model.kernel[ev]), int(model.tape[ev])
    arrays = {int(model.acc_array[r]) for r in access_rows(model, ev) if not model.acc_flags[r] & S.FLAG_GRAD}
    fallback = None
    for other in range(ev - 1, -1, -1):
        if model.kind[other] != K[S.LAUNCH] or model.adjoint[other] or not model.recorded[other]:
            continue
        if int(model.kernel[other]) != kernel or int(model.tape[other]) != tape:
            continue
        mine = {int(model.acc_array[r]) for r in access_rows(model, other)}
        if arrays <= mine:
            return other
        if fallback is None:
            fallback = other
    return fallback


RULE = Rule((WT501,), check)
