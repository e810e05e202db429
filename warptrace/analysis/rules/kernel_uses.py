"""What the trace proves about each kernel, for the kernel-source rules (WT401-WT408).

A pattern in a kernel's source matters only where the trace shows a gradient through it:
:func:`kernel_uses` gives, per kernel, the launch that proves the most (recorded on a tape
that is backpropagated, on the backward slice from the loss, with the kernel arguments
whose arrays carry a gradient), else a launch recorded on a tape never backpropagated,
else its first launch. :func:`source_finding` turns a source line into a finding that
points at the kernel or ``@wp.func`` line, with the launch and the backward as related
locations, and :func:`strongest` keeps one finding per rule and line (the worst).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from warptrace.analysis.dataflow import BackwardCall, Dataflow, dataflow_of
from warptrace.analysis.findings import Finding, Location, RuleInfo, Severity
from warptrace.analysis.model import K, KernelInfo, Model
from warptrace.analysis.rules.common import access_rows, backpropagated, finding, shared
from warptrace.kernel_source import FunctionFacts, KernelSource
from warptrace.trace import schema as S

__all__ = [
    "CASTS",
    "ROOTS",
    "STEPS",
    "KernelUse",
    "evidence_phrase",
    "kernel_uses",
    "source_finding",
    "strongest",
]


@dataclass
class KernelUse:
    """The strongest evidence the trace holds about one kernel."""

    kernel: KernelInfo
    launch: int  # event index of the launch the findings point at
    call: BackwardCall | None  # the backward replaying it, on the slice from the loss
    grad_args: frozenset[str]  # kernel arguments whose arrays carry a gradient there
    taped: bool  # recorded on a tape (backpropagated or not)

    @property
    def source(self) -> KernelSource:
        return self.kernel.source_model

    @property
    def backpropagated(self) -> bool:
        return self.call is not None and bool(self.grad_args)

    def carries(
        self, function: FunctionFacts, names: tuple[str, ...] | list[str] | set[str]
    ) -> frozenset[str]:
        """The gradient-carrying kernel arguments an expression of ``function`` reading ``names``
        depends on (empty when the kernel is not backpropagated)."""
        if not self.backpropagated:
            return frozenset()
        return self.source.kernel_args(function, names) & self.grad_args


def kernel_uses(model: Model) -> list[KernelUse]:
    """One :class:`KernelUse` per launched kernel with a parsed source model (shared by the rules)."""
    return shared(model, "kernel_uses", _build)


def _build(model: Model) -> list[KernelUse]:
    df = dataflow_of(model)
    candidates = {
        kernel_id
        for kernel_id, kernel in model.kernels.items()
        if kernel.enable_backward and _has_patterns(kernel.source_model)
    }
    best: dict[int, KernelUse] = {}
    if candidates:
        is_candidate = np.isin(model.kernel, np.fromiter(candidates, dtype=np.int64))
        # tapes without a kernel with a source pattern: their backward slices are skipped
        calls = [call for epoch, call in backpropagated(df) if is_candidate[epoch.events].any()]
        asks: list[tuple[BackwardCall, int]] = []
        for call, objective in zip(calls, df.objective_arrays_many(calls)):
            objective = objective[(model.kind[objective] == K[S.LAUNCH]) & is_candidate[objective]]
            # the first launch of each kernel on this backward's slice
            _, first = np.unique(model.kernel[objective], return_index=True)
            asks += [(call, ev) for ev in objective[np.sort(first)].tolist()]
        grad_args = _grad_args_many(
            model,
            df,
            np.array([ev for _, ev in asks], dtype=np.int64),
            np.array([call.begin_seq for call, _ in asks], dtype=np.int64),
        )
        for (call, ev), args in zip(asks, grad_args):
            kernel_id = int(model.kernel[ev])
            if not args:
                continue
            use = best.get(kernel_id)
            if use is None:
                best[kernel_id] = KernelUse(model.kernels[kernel_id], ev, call, args, True)
            else:
                use.grad_args = use.grad_args | args
    # kernels with no gradient evidence: their first taped launch, else their first launch
    launches = (model.kind == K[S.LAUNCH]) & ~model.adjoint
    taped = launches & model.recorded & (model.tape >= 0)
    for mask, is_taped in ((taped, True), (launches, False)):
        indexes = np.nonzero(mask)[0]
        kernels, first = np.unique(model.kernel[indexes], return_index=True)
        for kernel_id, ev in zip(kernels.tolist(), indexes[first].tolist()):
            kernel = model.kernels.get(int(kernel_id))
            if kernel is not None and int(kernel_id) not in best:
                best[int(kernel_id)] = KernelUse(kernel, int(ev), None, frozenset(), is_taped)
    return [use for use in best.values() if use.kernel.source_model.kernel.parsed]


def _grad_args(model: Model, df: Dataflow, ev: int, when: int) -> frozenset[str]:
    """Kernel arguments of launch ``ev`` whose arrays have a gradient at ``when``."""
    args = set()
    for row in access_rows(model, ev):
        if not df.grad_row_mask[row] and df.has_grad(int(model.acc_array[row]), when):
            args.add(str(model.acc_arg[row]))
    return frozenset(args)


def _grad_args_many(model: Model, df: Dataflow, evs: np.ndarray, whens: np.ndarray) -> list[frozenset[str]]:
    """:func:`_grad_args` of each (launch, seq) pair of ``evs`` and ``whens``, in one
    :meth:`has_grad_many` over all their access rows."""
    rows, owner = df.rows_of_events(evs)
    keep = ~df.grad_row_mask[rows]
    rows, owner = rows[keep], owner[keep]
    has = df.has_grad_many(model.acc_array[rows], whens[owner])
    found: list[set[str]] = [set() for _ in range(len(evs))]
    for position, row in zip(owner[has].tolist(), rows[has].tolist()):
        found[position].add(str(model.acc_arg[row]))
    return [frozenset(args) for args in found]


def _has_patterns(source: KernelSource) -> bool:
    """Whether anything in the kernel's call tree is a WT4xx candidate (a coarse filter that
    spares the backward slices of traces without any)."""
    for function in source.all_functions:
        if (
            any(loop.carried and not loop.unrolled for loop in function.loops)
            or function.stale_reads
            or function.adjoint_assigns
            or any(any(select.hazards) for select in function.selects)
            or any(a.target_kind == "array" for a in function.aug_assigns)
            or any(c.previous for c in function.component_assigns)
            or any(a.result_used for a in function.atomics)
            or any(c.as_value for c in function.comparisons)
            or any(c.name in _CALLS for c in function.calls)
        ):
            return True
    return False


# calls the kernel-source rules look at: roots (WT407, with ``pow``), piecewise constant
# functions and integer casts (WT408)
ROOTS = ("sqrt", "cbrt")
STEPS = ("round", "rint", "floor", "ceil", "trunc", "sign", "step", "nonzero")
CASTS = ("int", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_CALLS = frozenset((*ROOTS, "pow", *STEPS, *CASTS))


def source_finding(
    model: Model,
    info: RuleInfo,
    severity: Severity,
    use: KernelUse,
    function: FunctionFacts,
    line: int,
    message: str,
    role: str,
) -> Finding:
    """A finding at ``line`` of ``function`` (kernel or ``@wp.func``), the launch and the
    backward as related locations."""
    related = [model.event_location(use.launch, "launch")]
    if use.call is not None:
        related.append(model.location(use.call.site, "backward"))
    if function is not use.source.kernel:
        related.append(Location(use.kernel.file, use.kernel.line, "kernel", "", use.kernel.key))
    return finding(
        info,
        severity,
        message,
        Location(function.file, line, role, use.source.line_text_of(function, line), function.name),
        related=related,
        evidence={"first_seq": int(model.seq[use.launch]), "launch_seq": int(model.seq[use.launch])},
        key=(function.file, line),
    )


def strongest(findings: list[Finding]) -> list[Finding]:
    """One finding per (code, file, line): the worst severity (its message), counts added."""
    kept: dict[tuple[str, str, int], Finding] = {}
    for item in findings:
        key = (item.code, item.location.file, item.location.line)
        other = kept.get(key)
        if other is None:
            kept[key] = item
        elif item.severity > other.severity:
            item.related = other.related + [loc for loc in item.related if loc not in other.related]
            kept[key] = item
    return list(kept.values())


def evidence_phrase(model: Model, use: KernelUse, args: frozenset[str] | set[str]) -> str:
    """ "`x` carries the gradient (launch line N, backward line M)" for a message."""
    launch_line = model.event_location(use.launch).line
    if use.call is not None and not args:
        return (
            f"`{use.kernel.key}` is backpropagated (launch line {launch_line}, backward line "
            f"{model.location(use.call.site).line}) but no argument there carries a gradient"
        )
    if use.call is None or not args:
        if use.taped:
            after = model.backward_after_many(model.tape[[use.launch]], model.seq[[use.launch]])[0]
            if after >= 0:  # backpropagated, but the trace shows no path from this launch to the loss
                backward_line = model.event_location(model.ev_of_seq(int(after))).line
                return (
                    f"`{use.kernel.key}` is recorded on a tape (launch line {launch_line}) that is "
                    f"backpropagated (line {backward_line}), but no recorded launch or copy links it to the loss"
                )
            return f"`{use.kernel.key}` is recorded on a tape (launch line {launch_line}) that is never backpropagated"
        return f"`{use.kernel.key}` is launched outside any tape (line {launch_line})"
    names = ", ".join(f"`{a}`" for a in sorted(args))
    verb = "carries" if len(args) == 1 else "carry"
    return (
        f"{names} {verb} the gradient into `{use.kernel.key}` at the launch on line {launch_line}, "
        f"backpropagated on line {model.location(use.call.site).line}"
    )
