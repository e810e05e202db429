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

from warptrace.analysis.dataflow import BackwardCall, dataflow_of
from warptrace.analysis.findings import Finding, Location, RuleInfo, Severity
from warptrace.analysis.model import K, KernelInfo, Model
from warptrace.analysis.rules.common import access_rows, backpropagated, finding, shared
from warptrace.kernel_source import FunctionFacts, KernelSource
from warptrace.trace import schema as S

__all__ = ["KernelUse", "evidence_phrase", "kernel_uses", "source_finding", "strongest"]

# launches per kernel inspected for gradient-carrying arguments (the first ones tell)
_LAUNCHES_PER_KERNEL = 8


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
    best: dict[int, KernelUse] = {}
    seen: dict[int, int] = {}
    for _epoch, call in backpropagated(df):
        objective = df.objective_events(call)
        for ev in sorted(objective):
            if model.kind[ev] != K[S.LAUNCH]:
                continue
            kernel_id = int(model.kernel[ev])
            kernel = model.kernels.get(kernel_id)
            if kernel is None or seen.get(kernel_id, 0) >= _LAUNCHES_PER_KERNEL:
                continue
            if not kernel.enable_backward:
                continue  # its adjoint never runs: WT307 reports the kernel itself
            seen[kernel_id] = seen.get(kernel_id, 0) + 1
            args = set()
            for row in access_rows(model, ev):
                if df.grad_row_mask[row]:
                    continue
                if df.has_grad(int(model.acc_array[row]), call.begin_seq):
                    args.add(str(model.acc_arg[row]))
            if not args:
                continue
            use = best.get(kernel_id)
            if use is None or use.call is None:
                best[kernel_id] = KernelUse(kernel, ev, call, frozenset(args), True)
            else:
                use.grad_args = use.grad_args | frozenset(args)
    launches = (model.kind == K[S.LAUNCH]) & ~model.adjoint
    for ev in launches.nonzero()[0].tolist():
        kernel_id = int(model.kernel[ev])
        kernel = model.kernels.get(kernel_id)
        if kernel is None:
            continue
        taped = bool(model.recorded[ev]) and int(model.tape[ev]) >= 0
        use = best.get(kernel_id)
        if use is None:
            best[kernel_id] = KernelUse(kernel, ev, None, frozenset(), taped)
        elif use.call is None and taped and not use.taped:
            best[kernel_id] = KernelUse(kernel, ev, None, frozenset(), True)
    return [use for use in best.values() if use.kernel.source_model.kernel.parsed]


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
    if use.call is None or not args:
        if use.taped:
            return f"`{use.kernel.key}` is recorded on a tape (launch line {launch_line}) that is never backpropagated"
        return f"`{use.kernel.key}` is launched outside any tape (line {launch_line})"
    names = ", ".join(f"`{a}`" for a in sorted(args))
    verb = "carries" if len(args) == 1 else "carry"
    return (
        f"{names} {verb} the gradient into `{use.kernel.key}` at the launch on line {launch_line}, "
        f"backpropagated on line {model.location(use.call.site).line}"
    )
