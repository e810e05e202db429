"""The same launch recorded twice (WT201).

WT201 duplicate-launch
    Summary: the same launch recorded twice over the same memory with unchanged inputs
    Severity: error when a written array keeps its gradient (or Warp < 1.13); info otherwise
    Proves:
        The same kernel is recorded twice on one tape over the same memory (same arrays per
        argument, same launch dimensions), nothing it reads was written in between, and it only
        stores: the second launch recomputes exactly what the first one wrote. A leftover line,
        or two overlapping helper calls.
    Mechanism:
        Since Warp 1.13 a store's adjoint consumes (zeroes) the output gradient after reading
        it, so the second adjoint finds nothing and a bare duplicate is harmless. With
        ``retain_grad=True`` on a written array (or on Warp before 1.13) the gradient is not
        consumed, the backward adds the adjoint twice, and every gradient upstream of that
        array doubles exactly.
    Evidence:
        Two launch events of one tape with the same kernel, dimensions and per-argument
        allocations and views, no write to their inputs in between, plain stores only (kernel
        facts), and the ``retain_grad`` state of the written arrays at the backward.
    Example: wt201_retain_grad
    Fix:
        Delete the duplicate launch (or the second helper call).
    Silent on:
        The same kernel every step of a time loop on new memory; the same launch after its
        inputs were rewritten; launches that accumulate into their outputs (``+=``, atomics);
        two launches into disjoint halves of one buffer. Scalar arguments are not recorded, so
        two launches that differ only in a scalar look alike (a known limitation).
    Look-alikes: ok_flow_accumulate_steps, ok_flow_time_loop, ok_flow_retain_disjoint
    Warp documentation:
        "Differentiability", sections "Gradient accumulation" (``Tape.zero``, ``retain_grad``)
        and "Debugging Gradients".

Findings are grouped by root cause (the user line to change) with a count: a bug in a training
loop is one finding whose count is the number of iterations it hit.
"""

from __future__ import annotations

from warptrace.analysis.dataflow import dataflow_of
from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import Model
from warptrace.analysis.rules.common import DOC_ACCUMULATION, Rule, finding, join_names
from warptrace.analysis.rules.duplicates import duplicate_pairs

WT201 = RuleInfo(
    code="WT201",
    name="duplicate-launch",
    family="accumulation",
    fix="delete the duplicate launch (or the second call of the helper that launches it)",
    doc=DOC_ACCUMULATION,
)


def _wt201(model: Model, pairs: list[tuple[int, int, list[int]]]) -> list[Finding]:
    df = dataflow_of(model)
    old_warp = (1, 0) <= model.warp_version < (1, 13)
    findings = []
    for first, ev, written in pairs:
        call = df.backward_of_event(ev)
        when = call.begin_seq if call else int(model.seq[ev])
        kernel = model.kernel_name(ev)
        outputs = [model.array_label(int(model.acc_array[r]), model.acc_arg[r]) for r in written]
        retained = [
            model.array_label(int(model.acc_array[r]), model.acc_arg[r])
            for r in written
            if df.has_grad(int(model.acc_array[r]), when) and df.retains_grad(int(model.acc_array[r]), when)
        ]
        flows = any(
            df.is_read[r] and df.has_grad(int(model.acc_array[r]), when) and not df.grad_row_mask[r]
            for r in range(int(model.acc_start[ev]), int(model.acc_stop[ev]))
        )
        first_where = (
            "first by the same call, reached twice"
            if int(model.site[first]) == int(model.site[ev])
            else f"first at line {model.event_location(first).line}"
        )
        doubled = call is not None and flows and (retained or old_warp)
        if doubled:
            why = (
                f"{join_names(retained)} keeps its gradient (retain_grad=True), so the second store's adjoint does "
                "not consume it"
                if retained
                else f"on Warp {'.'.join(map(str, model.warp_version))} (< 1.13) stores do not consume "
                "output gradients"
            )
            message = (
                f"`{kernel}` is recorded twice on the tape over the same memory with unchanged inputs "
                f"({first_where}); {why}, and the backward adds its adjoint twice: every "
                f"gradient upstream of {join_names(outputs)} doubles"
            )
            severity = Severity.ERROR
        else:
            message = (
                f"`{kernel}` is recorded twice on the tape over the same memory with unchanged inputs "
                f"({first_where}): the second launch recomputes {join_names(outputs)}. Gradients are "
                "right here because the second store's adjoint consumes the output gradient (Warp >= 1.13), "
                "but they double with retain_grad=True on the output or on older Warp"
            )
            severity = Severity.INFO
        findings.append(
            finding(
                WT201,
                severity,
                message,
                model.event_location(ev, "duplicate launch"),
                related=[model.event_location(first, "first launch")]
                + ([model.location(call.site, "backward")] if call else []),
                evidence={
                    "first_seq": int(model.seq[ev]),
                    "launch_seqs": [int(model.seq[first]), int(model.seq[ev])],
                },
                key=(int(model.site[first]), int(model.site[ev]), int(model.kernel[ev]), severity),
            )
        )
    return findings


def check(model: Model) -> list[Finding]:
    return _wt201(model, duplicate_pairs(model))


RULE = Rule((WT201,), check)
