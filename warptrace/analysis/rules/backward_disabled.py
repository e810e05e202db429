"""A kernel compiled without its backward on a backpropagated tape (WT307).

WT307 backward-disabled
    Summary: an `enable_backward=False` kernel on a backpropagated tape
    Severity: error
    Proves:
        A kernel compiled with ``enable_backward=False`` (kernel option, module option or
        global config) is recorded on a tape that is backpropagated, on the path from a
        differentiable input to the loss: nothing upstream of it gets gradient through it.
    Mechanism:
        Warp skips the adjoint of such a kernel during ``tape.backward()``, with a one-time log
        warning; ``wp.autograd.gradcheck_tape`` skips it silently.
    Evidence:
        The kernel's ``enable_backward`` as compiled for the launch (module options such as
        ``wp.set_module_options`` switching it back on are followed), the launch on a
        backpropagated tape, and the dataflow from a parameter through it to the loss.
    Example: wt307_no_backward
    Fix:
        Compile the kernel with its backward, or keep it off the tape.
    Silent on:
        An ``enable_backward=False`` kernel on the tape that no parameter reaches (a mask);
        a forward-only pass with the backward disabled followed by training with it on.
    Look-alikes: ok_flow_nobackward_mask, ok_flow_backward_reenabled
    Warp documentation:
        "Differentiability", section "Limitations and Workarounds".

Findings are grouped by root cause (the user line to change) with a count.
"""

from __future__ import annotations

import numpy as np

from warptrace.analysis.dataflow import dataflow_of
from warptrace.analysis.findings import Finding, Location, RuleInfo, Severity
from warptrace.analysis.model import K, Model
from warptrace.analysis.rules.common import (
    DOC_LIMITS,
    Rule,
    array_label,
    backpropagated,
    differentiable_reads,
    finding,
    join_names,
)
from warptrace.trace import schema as S

WT307 = RuleInfo(
    code="WT307",
    name="backward-disabled",
    family="flow",
    fix="compile the kernel with its backward (drop enable_backward=False from the kernel or "
    "module options), or keep it off the tape",
    doc=DOC_LIMITS,
)


def check(model: Model) -> list[Finding]:
    df = dataflow_of(model)
    disabled = {k for k, kernel in model.kernels.items() if not kernel.enable_backward}
    if not disabled:
        return []
    findings = []
    # per event: a launch of a kernel with its backward disabled (picked from each slice at once)
    disabled_launch = np.isin(model.kernel, np.fromiter(disabled, dtype=np.int64, count=len(disabled)))
    disabled_launch &= model.kind == K[S.LAUNCH]
    calls = [call for _epoch, call in backpropagated(df)]
    for call, objective in zip(calls, df.objective_arrays_many(calls)):
        for ev in objective[disabled_launch[objective]].tolist():
            inputs = differentiable_reads(model, df, ev, call.begin_seq)
            leaves = df.provenance.get(ev, frozenset())
            if not inputs and not leaves:
                continue
            kernel = model.kernels[int(model.kernel[ev])]
            params = [array_label(model, p) for p in sorted(leaves)] or [
                array_label(model, a) for a in inputs
            ]
            message = (
                f"`{kernel.key}` is compiled with enable_backward=False (kernel or module option) but is recorded "
                f"on a tape that is backpropagated (line {model.location(call.site).line}), between "
                f"{join_names(params)} and the loss: Warp skips its adjoint, so no gradient flows through it"
            )
            findings.append(
                finding(
                    WT307,
                    Severity.ERROR,
                    message,
                    model.event_location(ev, "launch"),
                    related=[
                        Location(kernel.file, kernel.line, "kernel", "", kernel.key),
                        model.location(call.site, "backward"),
                    ],
                    evidence={"first_seq": int(model.seq[ev]), "launch_seq": int(model.seq[ev])},
                    key=(int(model.site[ev]), kernel.kernel_id),
                )
            )
    return findings


RULE = Rule((WT307,), check)
