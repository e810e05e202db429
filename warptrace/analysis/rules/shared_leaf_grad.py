"""A torch leaf's .grad written by Warp's adjoint and by torch's autograd (WT205).

WT205 shared-leaf-grad
    Summary: a torch leaf imported with its gradient gets Warp's adjoint and torch's accumulation in one backward
    Severity: error
    Proves:
        ``wp.from_torch(x)`` of a torch leaf that requires grad, inside a custom
        ``torch.autograd.Function``: the Warp array's gradient *is* the leaf's ``.grad`` memory,
        and one ``loss.backward()`` writes it twice: Warp's adjoint writes the gradient there,
        the Function's ``backward`` returns that gradient to torch (``wp.to_torch(ctx.x.grad)``),
        and torch's autograd adds the returned gradient into the leaf's ``.grad``, the same
        memory. The gradient is counted twice (checked on Warp 1.19 with torch 2.13: exactly 2x).
    Mechanism:
        ``wp.from_torch`` of a tensor that requires grad allocates the Warp gradient as the
        leaf's ``.grad`` (or wraps the ``.grad`` already there): zero-copy, one buffer, two
        frameworks that each think they own it.
    Evidence:
        The import names a torch leaf whose ``.grad`` is the Warp grad; an adjoint launch writes
        that memory; it is handed back to torch (an export of it) after that write; torch's
        autograd then accumulates into the leaf's ``.grad`` while it is still that tensor (a hook
        the recorder puts on such leaves), with nothing zeroing the memory in between.
    Example: wt205_torch_leaf
    Fix:
        Import a detached tensor (``wp.from_torch(x.detach(), requires_grad=True)``): Warp then
        has a gradient buffer of its own, and torch accumulates the returned gradient once.
    Silent on:
        A detached import, ``requires_grad=False``; a Function that returns no gradient for the
        input and relies on the shared memory alone; ``torch.autograd.grad`` (it returns
        gradients without accumulating into ``.grad``); a leaf whose ``.grad`` was reset
        (``opt.zero_grad()``) between the forward and the backward, so that torch's
        accumulation lands in a new tensor; Warp's documented optimization loop (a leaf imported
        once, ``tape.backward(loss)``, a torch optimizer: one writer).
    Look-alikes: ok_bridge_torch_optimizer, ok_bridge_leaf_shared_only, ok_bridge_leaf_autograd_grad
    Warp documentation:
        "Interoperability", section "PyTorch" (``from_torch``, custom autograd functions).
"""

from __future__ import annotations

import numpy as np

from warptrace.analysis.bridges import TorchImport, bridges_of, import_label
from warptrace.analysis.dataflow import Dataflow, dataflow_of
from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import Model
from warptrace.analysis.rules.common import DOC_ACCUMULATION, Rule, finding
from warptrace.trace import schema as S

DOC_TORCH = "Interoperability > PyTorch"

WT205 = RuleInfo(
    code="WT205",
    name="shared-leaf-grad",
    family="accumulation",
    fix="import a detached tensor, wp.from_torch(x.detach(), requires_grad=True), so that Warp has a "
    "gradient buffer of its own and torch adds the returned gradient once",
    doc=DOC_TORCH + "; " + DOC_ACCUMULATION,
)


def check(model: Model) -> list[Finding]:
    bridges = bridges_of(model)
    if not bridges.accumulates:
        return []
    df = dataflow_of(model)
    leaves = [found for found in bridges.imports if found.leaf and found.grad_id >= 0 and found.tensor >= 0]
    findings: dict[tuple[str, int], Finding] = {}
    for acc in bridges.accumulates:
        source = _import_before(model, leaves, acc.tensor, acc.grad_tensor, acc.ev)
        if source is None:
            continue
        evidence = _written_and_returned(model, df, bridges.exports, source, acc.ev)
        if evidence is None:
            continue
        write_ev, export_ev = evidence
        location = model.event_location(source.ev, "import")
        key = (location.file, location.line)
        if key in findings:
            findings[key].count += 1
            continue
        label = import_label(model, bridges, source.array_id)
        call = int(df.ev_backward[write_ev])
        writer = (
            model.location(df.backward_calls[call].site, "Warp adjoint")
            if call >= 0
            else model.event_location(write_ev, "Warp adjoint")
        )
        message = (
            f"`{label}` is made by wp.from_torch of a torch leaf that requires grad, so its Warp "
            f"gradient `{label}.grad` is the leaf's own .grad memory: two writers add the same gradient "
            f"there in one backward, Warp's adjoint (line {writer.line}) and torch's autograd, which "
            f"accumulates the gradient the Function hands back to it "
            f"(`{model.event_location(export_ev).text or 'wp.to_torch'}`) into that memory: "
            f"the gradient is counted twice"
        )
        findings[key] = finding(
            WT205,
            Severity.ERROR,
            message,
            location,
            related=[
                writer,
                model.event_location(export_ev, "handed back to torch"),
                model.event_location(acc.ev, "torch accumulates"),
            ],
            evidence={
                "first_seq": int(model.seq[source.ev]),
                "array_id": int(source.grad_id),
                "write_seq": int(model.seq[write_ev]),
                "accumulate_seq": int(model.seq[acc.ev]),
            },
            key=key,
        )
    return list(findings.values())


def _import_before(
    model: Model, leaves: list[TorchImport], tensor: int, grad_tensor: int, before_ev: int
) -> TorchImport | None:
    """The last import of leaf ``tensor`` before ``before_ev`` whose grad is ``grad_tensor``."""
    found = None
    for candidate in leaves:
        if candidate.ev >= before_ev:
            break
        if candidate.tensor == tensor:
            found = candidate
    if found is None or grad_tensor < 0 or found.grad_tensor != grad_tensor:
        return None  # torch accumulated into another tensor (the .grad was reset or replaced)
    return found


def _written_and_returned(
    model: Model, df: Dataflow, exports: list[int], source: TorchImport, acc_ev: int
) -> tuple[int, int] | None:
    """(the last adjoint write into the shared grad memory before ``acc_ev``, the export of that
    memory after it), when nothing but adjoints wrote the memory after that write; else None."""
    begin, end = int(model.seq[source.ev]), int(model.seq[acc_ev])
    rows = df.writes_between(source.grad_id, begin, end)
    if not len(rows):
        return None
    evs = df.acc_ev[rows]
    adjoint = model.adjoint[evs]
    if not adjoint.any():
        return None
    last = int(np.nonzero(adjoint)[0][-1])
    if len(rows) > last + 1:
        return None  # written again after Warp's adjoint (zeroed, overwritten) before torch adds
    write_ev = int(evs[last])
    info = model.arrays.get(source.grad_id)
    if info is None:
        return None
    lo, hi = info.hull
    for ev in exports:
        if not write_ev < ev < acc_ev:
            continue
        for row in range(int(model.acc_start[ev]), int(model.acc_stop[ev])):
            if (
                int(model.acc_alloc[row]) == info.alloc_id
                and df.acc_lo[row] < hi
                and lo < df.acc_hi[row]
                and model.acc_role[row] & S.ROLE_READ
            ):
                return write_ev, ev
    return None


RULE = Rule((WT205,), check)
