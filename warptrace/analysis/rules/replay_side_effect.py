"""An atomic slot counter with no replay function (WT405).

WT405 replay-side-effect
    Summary: an atomic slot counter in a kernel with no `@wp.func_replay`
    Severity: error on a backpropagated tape with a gradient through the kernel; info when the
    kernel is taped but not backpropagated; silent outside tapes
    Proves:
        A kernel hands out slots or indices with an atomic whose returned old value it uses
        (``slot = wp.atomic_add(count, 0, 1)``; ``out[slot] = ...``) and has no
        ``@wp.func_replay`` for it: in the backward the slot is not the one the forward used.
    Mechanism:
        The adjoint kernel re-runs the forward statements to rebuild the values it needs, but
        not the atomic in the kernel body (a side effect), so the slot is lost (verified on Warp
        1.19: every thread reads the adjoint of slot 0). Inside a ``@wp.func`` the replay runs
        the atomic again and the counter keeps counting: WT308 proves that case from the trace,
        so WT405 reports a function's atomic only when the trace holds no adjoint launch of the
        kernel to prove it.
    Evidence:
        The kernel-source model (atomics whose result is used, ``@wp.func_replay`` functions),
        the launch on a tape and whether that tape is backpropagated.
    Example: wt405_compact
    Fix:
        Compute the slots in a separate, untaped launch and pass them in as an array, or move the
        atomic into a ``@wp.func`` with a ``@wp.func_replay`` that returns the stored slot.
    Silent on:
        Atomics used only to accumulate (``wp.atomic_add(loss, 0, v)``); a function with a
        ``@wp.func_replay`` that returns the slot recorded in the forward pass; counters outside
        the tape.
    Look-alikes: ok_src_replay, ok_flow_counter_untaped
    Warp documentation:
        "Differentiability", section "Custom Replay Functions".
"""

from __future__ import annotations

import numpy as np

from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import K, Model
from warptrace.analysis.rules.common import DOC_CUSTOM_REPLAY, Rule, shared
from warptrace.analysis.rules.kernel_uses import evidence_phrase, kernel_uses, source_finding, strongest
from warptrace.kernel_source import FUNC, KERNEL
from warptrace.trace import schema as S

WT405 = RuleInfo(
    code="WT405",
    name="replay-side-effect",
    family="kernel",
    fix="compute the slots in an untaped launch and pass them in as an array, or put the atomic in a "
    "@wp.func with a @wp.func_replay that returns the slot recorded in the forward pass",
    doc=DOC_CUSTOM_REPLAY,
)


def check(model: Model) -> list[Finding]:
    replayed = shared(model, "adjoint_kernels", _adjoint_kernels)
    findings = []
    for use in kernel_uses(model):
        if not use.taped:
            continue
        for function in use.source.all_functions:
            if function.role == FUNC:
                if use.source.has_replay(function) or use.kernel.kernel_id in replayed:
                    continue
            elif function.role != KERNEL:
                continue
            for atomic in function.atomics:
                if not atomic.result_used:
                    continue
                severity = Severity.ERROR if use.backpropagated else Severity.INFO
                args = use.grad_args if use.backpropagated else frozenset()
                message = (
                    f"`{atomic.name}` on `{atomic.array}` hands out values the kernel uses (a counter or "
                    "slot): the adjoint does not see the value the forward pass got"
                    + (" (the replay runs the function again)" if function.role == FUNC else "")
                    + f", so adjoints are read from and written to the wrong elements; "
                    f"{evidence_phrase(model, use, args)}"
                )
                findings.append(
                    source_finding(model, WT405, severity, use, function, atomic.line, message, "atomic")
                )
    return strongest(findings)


def _adjoint_kernels(model: Model) -> set[int]:
    """Kernels with an adjoint launch in the trace (WT308 judges their replayed side effects)."""
    mask = (model.kind == K[S.LAUNCH]) & model.adjoint
    return {int(k) for k in np.unique(model.kernel[mask]).tolist()}


RULE = Rule((WT405,), check)
