"""An iterative solve on the tape stopped before it converged (WT504).

WT504 unconverged-iteration
    Summary: an iterative solve on the tape stopped while its iterate still changes
    Severity: warning (traces recorded with ``--check-numerics`` only)
    Proves:
        An iterative solve on the tape stopped while its last change is still large relative to
        the iterate: the gradient backpropagated through it is that of the truncated solver, not
        of the solution the program means. Reported at the launch line with the iteration
        count, the contraction rate and about how many more iterations a relative change of
        1e-6 needs.
    Mechanism:
        Autodiff and finite differences agree on the truncated program, so ``gradcheck`` says
        "agree"; yet the gradient is not that of the converged solution, and an optimizer
        chasing it can miss the target.
    Evidence:
        The solve's signature in the trace: the same kernel launched in a chain, each launch
        reading under one argument the array the previous one wrote under another (its
        iterate), everything else it reads unchanged over the chain; and in the ``numerics``
        table the successive changes of the iterate shrinking geometrically (a contraction to a
        fixed point).
    Example: wt504_jacobi
    Fix:
        Iterate to convergence (more iterations or a residual test), or differentiate the
        converged solution implicitly (an adjoint solve) instead of through the iterations.
    Silent on:
        A time-stepping rollout (its state does not contract to a fixed point, or its other
        inputs are recomputed between steps); a deliberately fixed number of steps whose
        intermediate states the objective itself uses (a loss over the trajectory). Without
        ``--check-numerics`` the rule is silent.
    Look-alikes: ok_num_rollout, ok_num_diffusion_trajectory
    Warp documentation:
        "Differentiability", section "Debugging Gradients".
"""

from __future__ import annotations

import math

import numpy as np

from warptrace.analysis.dataflow import dataflow_of
from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import K, Model
from warptrace.analysis.numerics import NumericsTable, Summary, numerics_of
from warptrace.analysis.rules.common import DOC_DEBUG, Rule, access_rows, finding, quote
from warptrace.trace import schema as S

WT504 = RuleInfo(
    code="WT504",
    name="unconverged-iteration",
    family="numeric",
    fix="iterate until the change is small (more iterations or a residual test), or differentiate "
    "the converged solution implicitly instead of through the truncated loop",
    doc=DOC_DEBUG,
)

MIN_STEPS = 3  # changes needed to see a geometric trend
MAX_RATE = 0.95  # a contraction: every successive change shrinks by at least this factor
FAR = 1e-3  # last change relative to the iterate above which the solve has not converged
TARGET = 1e-6  # relative change a converged solve reaches (for "how many more")


def check(model: Model) -> list[Finding]:
    table = numerics_of(model)
    if table is None:
        return []
    findings = []
    for chain in _chains(model, table):
        result = _unconverged(model, table, chain)
        if result is not None:
            findings.append(result)
    return findings


def _chains(model: Model, table: NumericsTable) -> list[list[Summary]]:
    """Step rows grouped into chains: each row's input is the previous row's output."""
    chains: list[list[Summary]] = []
    open_by_output: dict[int, list[Summary]] = {}
    for row in table.of_kind(S.NUM_STEP):
        chain = open_by_output.pop(row.owner, None)
        if chain is None or chain[-1].arg != row.arg:
            chain = []
            chains.append(chain)
        chain.append(row)
        open_by_output[row.array_id] = chain
    return [chain for chain in chains if len(chain) >= MIN_STEPS]


def _unconverged(model: Model, table: NumericsTable, chain: list[Summary]) -> Finding | None:
    try:
        evs = [model.ev_of_seq(row.seq) for row in chain]
    except KeyError:
        return None
    if not all(model.kind[ev] == K[S.LAUNCH] and model.recorded[ev] and not model.adjoint[ev] for ev in evs):
        return None
    if len({int(model.kernel[ev]) for ev in evs}) != 1 or not _fixed_inputs(model, chain, evs):
        return None
    changes = np.array([row.l2 for row in chain], dtype=np.float64)
    if not np.all(np.isfinite(changes)) or np.any(changes <= 0):
        return None
    rates = changes[1:] / changes[:-1]
    if not np.all(rates < MAX_RATE):
        return None
    rate = float(np.exp(np.mean(np.log(rates[len(rates) // 2 :]))))  # the settled rate
    last = chain[-1]
    written = next(
        (r for r in table.by_seq.get(last.seq, []) if r.what == S.NUM_WRITE and r.array_id == last.array_id),
        None,
    )
    size = written.l2 if written is not None else 0.0
    if size <= 0 or changes[-1] / size <= FAR:
        return None
    if _trajectory_used(model, evs):
        return None
    relative = float(changes[-1] / size)
    more = math.ceil(math.log(TARGET / relative) / math.log(rate)) if 0 < rate < 1 else -1
    ev = evs[-1]
    kernel = model.kernel_name(ev)
    iterations = len(chain) + 1
    where = model.event_location(ev, "iteration")
    message = (
        f"kernel {quote(kernel)} is iterated {iterations} times as a contraction (each change about "
        f"{rate:.2g} times the previous one) but its last change is still {relative:.2g} of the iterate "
        f"{quote(model.array_label(last.array_id, last.arg))}: the solve stopped before converging, and the gradient "
        f"through it is that of the truncated solver (about {more} more iterations for a relative change of "
        f"{TARGET:g})"
    )
    return finding(
        WT504,
        Severity.WARNING,
        message,
        where,
        evidence={
            "first_seq": chain[0].seq,
            "kernel": kernel,
            "iterations": iterations,
            "rate": rate,
            "last_relative_change": relative,
            "more_iterations": more,
        },
        key=(int(model.kernel[ev]), where.file, where.line),
    )


def _fixed_inputs(model: Model, chain: list[Summary], evs: list[int]) -> bool:
    """Every launch of the chain reads the same other arrays, and nothing writes them meanwhile."""
    others = None
    for row, ev in zip(chain, evs):
        reads = {
            int(model.acc_array[r])
            for r in access_rows(model, ev)
            if model.acc_role[r] == S.ROLE_READ and int(model.acc_array[r]) != row.owner
        }
        if others is None:
            others = reads
        elif reads != others:
            return False
    if not others:
        return True
    start = int(np.searchsorted(model.acc_seq, chain[0].seq, side="left"))
    stop = int(np.searchsorted(model.acc_seq, chain[-1].seq, side="right"))
    window = slice(start, stop)
    writes = (model.acc_role[window] & S.ROLE_WRITE) != 0
    return not bool(np.any(writes & np.isin(model.acc_array[window], list(others))))


def _trajectory_used(model: Model, evs: list[int]) -> bool:
    """The objective of the chain's own tape epoch reads, outside the chain, what at least
    half of the launches before the last wrote: a loss over the trajectory, so the steps are
    the program. The reads are traced to their writers (def-use), so an iterate buffer
    reused by a later solve or used in turn (ping-pong) counts only for the values this
    chain's steps wrote into it."""
    df = dataflow_of(model)
    epoch = int(df.ev_epoch[evs[0]])
    if epoch < 0 or not df.epochs[epoch].backwards:
        return False
    chain = set(evs)
    readers = sorted(df.objective_events(df.backward_calls[df.epochs[epoch].backwards[0]]) - chain)
    if not readers:
        return False
    rows, _ = df.rows_of_events(np.asarray(readers, dtype=np.int64))
    writers, _ = df.writer_rows_many(rows[df.is_read[rows]])
    steps = set(evs[:-1])
    used = steps.intersection(model.acc_ev[writers].tolist())
    return 2 * len(used) >= len(steps)


RULE = Rule((WT504,), check)
