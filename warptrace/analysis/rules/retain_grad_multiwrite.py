"""An array with retain_grad=True written twice on a tape (WT202).

WT202 retain-grad-multiwrite
    Summary: an array with `retain_grad=True` written twice on a tape: its gradient is counted twice
    Severity: error
    Proves:
        An array object with ``retain_grad=True`` is overwritten on a tape that is
        backpropagated while an earlier recorded launch or copy on the same tape wrote the same
        elements, or one kernel stores the same element twice (``y[i] = a`` then ``y[i] = b``).
        The overwritten first write also receives the gradient: its inputs get gradient for a
        value that never reached the loss.
    Mechanism:
        ``retain_grad`` turns off the consumption of the output gradient by a store's adjoint
        (Warp >= 1.13), so the adjoint of every write of the element reads the full
        ``y.grad``, not only the last one. The typical signature is an exact 2x on the elements
        written twice when both writes compute the same thing.
    Evidence:
        The ``retain_grad`` flag of the array (an array event), two write accesses to
        overlapping elements on one backpropagated tape, or a kernel whose source model stores
        the same element twice.
    Example: wt202_two_launches
    Fix:
        Write each value to its own array and keep ``retain_grad`` only on arrays written once
        (or compute the final value in a local and store it once).
    Silent on:
        One kernel launched twice into disjoint parts of a ``retain_grad`` buffer.
    Look-alikes: ok_flow_retain_disjoint
    Warp documentation:
        "Differentiability", sections "Gradient accumulation" (``Tape.zero``, ``retain_grad``)
        and "Debugging Gradients".

Findings are grouped by root cause (the user line to change) with a count: a bug in a training
loop is one finding whose count is the number of iterations it hit.
"""

from __future__ import annotations

import numpy as np

from warptrace.analysis.dataflow import Dataflow, dataflow_of
from warptrace.analysis.findings import Finding, Location, RuleInfo, Severity
from warptrace.analysis.model import K, KernelInfo, Model
from warptrace.analysis.rules.common import DOC_ACCUMULATION, Rule, finding
from warptrace.analysis.rules.duplicates import duplicate_pairs
from warptrace.trace import schema as S

WT202 = RuleInfo(
    code="WT202",
    name="retain-grad-multiwrite",
    family="accumulation",
    fix="write each value to its own array, or store the final value once from a local; keep "
    "retain_grad=True only on arrays written once per tape",
    doc=DOC_ACCUMULATION,
)


def _wt202(model: Model, duplicates: set[tuple[int, int]]) -> list[Finding]:
    df = dataflow_of(model)
    retaining = {a for a, info in model.arrays.items() if info.retain_grad} | set(df._retain)
    if not retaining:
        return []
    findings = []
    rows = np.nonzero(
        np.isin(model.acc_array, np.fromiter(retaining, dtype=np.int64)) & df.is_store & ~df.is_uncertain
    )[0]
    for row in rows.tolist():
        ev = int(df.acc_ev[row])
        epoch = df.epoch_of(ev)
        if epoch is None or model.kind[ev] not in (K[S.LAUNCH], K[S.COPY]):
            continue
        call = df.first_backward(epoch, int(model.seq[ev]))
        array_id = int(model.acc_array[row])
        if call is None or not (
            df.has_grad(array_id, call.begin_seq) and df.retains_grad(array_id, call.begin_seq)
        ):
            continue
        label = model.array_label(array_id, model.acc_arg[row])
        # an earlier write on the same tape epoch whose adjoint would also receive the gradient
        earlier = [
            w
            for w in df.writes_between(
                array_id, int(model.seq[epoch.events[0]]) - 1, int(model.seq[ev])
            ).tolist()
            if df.ev_epoch[df.acc_ev[w]] == epoch.uid and not df.is_uncertain[w]
        ]
        first = int(df.acc_ev[earlier[-1]]) if earlier else -1
        if first >= 0 and (first, ev) not in duplicates and _propagates(model, df, first, call.begin_seq):
            findings.append(
                finding(
                    WT202,
                    Severity.ERROR,
                    f"`{label}` keeps its gradient (retain_grad=True) and is written twice on the tape: "
                    f"{_what(model, first)} at line {model.event_location(first).line} and {_what(model, ev)} "
                    f"here overwrite the same elements, so the backward passes `{label}.grad` to both and the "
                    f"inputs of the overwritten write get gradient for a value that never reached the loss",
                    model.event_location(ev, "second write"),
                    related=[
                        model.event_location(first, "first write"),
                        model.location(call.site, "backward"),
                    ],
                    evidence={
                        "first_seq": int(model.seq[ev]),
                        "write_seqs": [int(model.seq[first]), int(model.seq[ev])],
                        "array_id": array_id,
                    },
                    key=(int(model.site[first]), int(model.site[ev]), label),
                )
            )
            continue
        if model.kind[ev] != K[S.LAUNCH]:
            continue
        kernel = model.kernels.get(int(model.kernel[ev]))
        lines = _stores_twice(kernel, model.acc_arg[row], model.acc_field[row]) if kernel else None
        if kernel is not None and lines and _propagates(model, df, ev, call.begin_seq):
            related = [model.location(call.site, "backward")]
            for line in lines:
                related.append(Location(kernel.file, line, "store", _kernel_text(kernel, line), kernel.key))
            findings.append(
                finding(
                    WT202,
                    Severity.ERROR,
                    f"`{kernel.key}` stores the same element of `{label}` twice (kernel lines "
                    f"{', '.join(map(str, lines))}) and `{label}` keeps its gradient (retain_grad=True): the "
                    f"adjoint of the second store does not consume `{label}.grad`, so the overwritten first "
                    "store's adjoint also receives it",
                    model.event_location(ev, "launch"),
                    related=related,
                    evidence={
                        "first_seq": int(model.seq[ev]),
                        "launch_seq": int(model.seq[ev]),
                        "array_id": array_id,
                    },
                    key=(int(model.site[ev]), kernel.kernel_id, model.acc_arg[row], model.acc_field[row]),
                )
            )
    return findings


def _what(model: Model, ev: int) -> str:
    if model.kind[ev] == K[S.LAUNCH]:
        return f"`{model.kernel_name(ev)}`"
    return "a copy"


def _propagates(model: Model, df: Dataflow, ev: int, when: int) -> bool:
    """Whether the adjoint of ``ev`` passes gradient on (it reads an array that has a .grad)."""
    for row in range(int(model.acc_start[ev]), int(model.acc_stop[ev])):
        if df.is_read[row] and not df.grad_row_mask[row] and df.has_grad(int(model.acc_array[row]), when):
            return True
    return False


def _kernel_text(kernel: KernelInfo, line: int) -> str:
    return kernel.source_model.kernel_line_text(line) or ""


def _stores_twice(kernel: KernelInfo, arg: str, field_path: str) -> list[int] | None:
    return kernel.source_model.stores_twice(arg + ("." + field_path if field_path else ""))


def check(model: Model) -> list[Finding]:
    return _wt202(model, {(first, second) for first, second, _ in duplicate_pairs(model)})


RULE = Rule((WT202,), check)
