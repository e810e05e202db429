"""Launches recorded after the loss is final (WT105).

WT105 work-after-loss
    Summary: launches recorded after the loss is final that do not feed it
    Severity: warning (error when such a launch also overwrites memory an earlier launch on the
    tape read)
    Proves:
        Launches recorded on tape T after the last recorded launch that writes the loss, before
        T's backward, that do not feed the loss (nor the objective of another backward of the
        same recording): post-loss housekeeping (a state reset, metrics, logging kernels, an
        optimizer step) indented inside ``with tape:``.
    Mechanism:
        Everything recorded on the tape is replayed by ``tape.backward()``: the adjoints of
        post-loss launches run for nothing, and when such a launch overwrites memory that an
        earlier launch read, the earlier launch's adjoint sees the new values (then it is an
        error naming that buffer, not reported a second time as WT101). Moving the work
        outside the ``with`` block but still before ``tape.backward()`` turns its overwrites
        into WT103.
    Evidence:
        The recorded launches of T in order, the launch that last writes the array the backward
        is seeded on, and the dataflow from each later launch: none of its outputs reaches the
        loss or another backward's objective.
    Example: wt105_reset
    Fix:
        Move the work after ``tape.backward()``.
    Silent on:
        A tape that records several objectives (heads) and backpropagates each in turn: a launch
        that feeds the objective of another backward of the same recording is not post-loss
        work.
    Look-alikes: ok_flow_multi_head
    Warp documentation:
        "Differentiability", sections "Array Overwrites" and "Array Overwrite Tracking".

Findings are grouped by root cause (the user line to change) with a count.
"""

from __future__ import annotations

from warptrace.analysis.findings import Finding, Location, RuleInfo, Severity
from warptrace.analysis.model import K, Model
from warptrace.analysis.rules.common import DOC_OVERWRITES, Rule, quote
from warptrace.analysis.rules.overwrite_after_read import overwrites
from warptrace.analysis.rules.overwrite_evidence import (
    Group,
    append_loc,
    grouped_finding,
    site_line,
)
from warptrace.analysis.rules.post_loss import post_loss_launches
from warptrace.trace import schema as S

WT105 = RuleInfo(
    code="WT105",
    name="work-after-loss",
    family="memory",
    fix="move post-loss work (state reset, metrics, logging, optimizer steps) out of `with tape:` and "
    "after tape.backward()",
    doc=DOC_OVERWRITES,
)


def _work_after_loss(
    model: Model,
    post_loss: dict[int, tuple[int, int, int]],
    clobbered: dict[tuple[int, int], tuple[int, int, Severity]],
) -> list[Finding]:
    groups: dict[tuple[int, int], Group] = {}
    for ev in sorted(post_loss):
        loss_ev, begin_ev, loss_array = post_loss[ev]
        gkey = (int(model.site[ev]), int(model.kernel[ev]))
        group = groups.get(gkey)
        if group is None:
            severity = clobbered[gkey][2] if gkey in clobbered else Severity.WARNING
            group = groups[gkey] = Group("WT105", severity, (ev, loss_ev, begin_ev, loss_array))
        group.add(group.severity, int(model.seq[ev]), int(model.seq[loss_ev]), (), -1)

    findings = []
    for gkey, group in groups.items():
        ev, loss_ev, begin_ev, loss_array = group.first
        message = (
            f"kernel {quote(model.kernel_name(ev))} is recorded on the tape after the loss "
            f"{quote(model.array_label(loss_array))} is final (last written by {_writer_phrase_short(model, loss_ev)} "
            f"at {site_line(model, int(model.site[loss_ev]))}) and does not feed it, so tape.backward() "
            f"({site_line(model, int(model.site[begin_ev]))}) runs its adjoint for nothing"
        )
        related: list[Location] = []
        if gkey in clobbered:
            read_row = clobbered[gkey][0]
            read_ev = int(model.acc_ev[read_row])
            reader = quote(model.kernel_name(read_ev))
            buffer = quote(model.array_label(int(model.acc_array[read_row]), model.acc_arg[read_row]))
            message += (
                f"; worse, it overwrites {buffer}, which kernel {reader} read earlier on the tape "
                f"({site_line(model, int(model.site[read_ev]))}), so the adjoint of {reader} runs against the "
                "new values"
            )
            append_loc(related, model.event_location(read_ev, "read"))
            append_loc(
                related, model.location(model.allocation_site(int(model.acc_array[read_row])), "allocation")
            )
            group.array_ids.add(int(model.acc_array[read_row]))
            group.alloc_ids.add(int(model.acc_alloc[read_row]))
        else:
            message += "; anything it overwrites would also corrupt the adjoints of earlier launches"
        append_loc(related, model.event_location(loss_ev, "loss final"))
        append_loc(related, model.event_location(begin_ev, "backward"))
        location = model.event_location(ev, "post-loss launch")
        findings.append(grouped_finding(WT105, group, message, location, related, gkey))
    return findings


def _writer_phrase_short(model: Model, ev: int) -> str:
    if model.kind[ev] in (K[S.LAUNCH], K[S.CMD_LAUNCH]):
        return quote(model.kernel_name(ev))
    return "a copy" if model.kind[ev] == K[S.COPY] else "a memset"


def check(model: Model) -> list[Finding]:
    return _work_after_loss(model, post_loss_launches(model), overwrites(model)[1])


RULE = Rule((WT105,), check)
