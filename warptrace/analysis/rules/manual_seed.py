"""A hand seed that may not match the objective the program reports (WT304).

WT304 manual-seed
    Summary: a hand seed on a multi-element array that contradicts the objective the program reports
    Severity: warning
    Proves:
        ``tape.backward()`` without ``loss=``, seeded by hand on an array of N > 1 elements
        (``x.grad.fill_(1.0)``, ``assign``, or ``backward(grads={x: ones})``), while the program
        reduces the same values with other weights to form the objective it reports: the
        gradient is that of the *sum* of the N elements, N times the gradient of their mean.
        Right if the objective is the sum; wrong by exactly N if it is the mean.
    Mechanism:
        A seed defines the objective: ``sum(seed * y)``. ``tape.backward(loss)`` seeds a scalar
        with 1.0; a hand seed on a vector is Warp's vector-Jacobian product, correct only for
        the objective it defines. A clean power of two between the gradient and the expected one
        is the usual hint.
    Evidence:
        A seed alone is no evidence. The rule needs the trace to show the program reducing the
        seeded values with other weights (:mod:`.seed_objectives`): anywhere in the run (before
        or after the backward, in a later iteration, on the array rebuilt at the same line and
        recomputed by the same kernel), a kernel whose source fixes the weight of each element
        (a mean kernel ``terms[i] / float(N)``, ``/ float(terms.shape[0])``, through
        ``@wp.func`` callees), ``array_sum``, or a host read on a line taking their mean
        (``np.mean(terms.numpy())``) or sum. A seed of known value (``fill_(v)``, ``grads=``
        from a filled array) is reported when such a reduction uses another weight (the
        message gives the ratio) and none uses the seed's; a seed matching any of them is
        silent. A seed whose value the trace does not hold (``wp.ones_like``, a host copy) is
        reported only on the earlier evidence: a host mean or an untaped reduction of the values
        between their last write and the backward. Hence a warning, not an error: the reduction
        the program prints may be a metric rather than the objective.
    Example: wt304_mean_after_update
    Fix:
        Reduce to a scalar loss on the tape (with the 1/N of a mean) and call
        ``tape.backward(loss)``.
    Silent on:
        ``backward(grads={y: ones})`` with nothing reducing ``y`` (Warp's documented
        vector-Jacobian product: the seeded sum *is* the objective); ``wp.autograd.jacobian``
        seeding one element at a time; a seed matching one of the program's reductions; a
        reduction whose weight the trace cannot evaluate (a scalar kernel argument), a
        non-linear summary (a maximum, a mean of squares) or host arithmetic on later lines; a
        nonzero fill of the ``.grad`` of an input the recording never writes (pre-accumulation,
        not a seed).
    Look-alikes: ok_flow_vjp_seed, ok_acc_jacobian_rows, ok_seed_sum_objective, ok_seed_nonlinear_metric
    Warp documentation:
        ``Tape.backward`` (``grads=``) and "Differentiability", section "Debugging Gradients".

Findings are grouped by root cause (the user line to change) with a count.
"""

from __future__ import annotations

import numpy as np

from warptrace.analysis.dataflow import BackwardCall, Dataflow, dataflow_of
from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import K, Model
from warptrace.analysis.rules.common import (
    DOC_DEBUG,
    Rule,
    access_rows,
    array_label,
    finding,
)
from warptrace.analysis.rules.seed_objectives import MEAN_LINE, Objective, objectives_of, producer
from warptrace.trace import schema as S

WT304 = RuleInfo(
    code="WT304",
    name="manual-seed",
    family="flow",
    fix="reduce to a scalar loss on the tape (with the 1/N of a mean) and call tape.backward(loss)",
    doc="Tape.backward; " + DOC_DEBUG,
)


def check(model: Model) -> list[Finding]:
    df = dataflow_of(model)
    findings = []
    reads: dict[int, tuple] = {}
    for call in df.backward_calls:
        if call.loss >= 0:
            continue
        for ev, _grad_id, owner, from_grad in df.seeds(call):
            if from_grad:
                continue  # an adjoint handed over from another backward (checkpointing), not a seed
            if _external_source(model, df, ev, call):
                continue  # an upstream gradient from framework memory (e.g. a PyTorch grad_output)
            info = model.arrays.get(int(owner))
            size = info.size if info else 0
            if size <= 1:
                continue
            window_ev = _objective_read(model, df, int(owner), call, reads)
            if window_ev == _NOT_AN_OUTPUT:
                continue
            value = _seed_value(model, df, ev, call)
            kernel = producer(model, df, int(owner), call.begin_seq)
            reductions = objectives_of(model, df, int(owner), kernel)
            reported = _contradicted(value, reductions, call)
            if reported is None:
                if window_ev < 0 or _matches(value, reductions):
                    continue  # no reported objective the seed could contradict
                if not np.isnan(value) and abs(value * size - 1.0) < 1e-6:
                    continue  # seeded with 1/N: the mean
            findings.append(_finding(model, ev, call, int(owner), size, value, reported, window_ev))
    return findings


def _finding(
    model: Model, ev: int, call: BackwardCall, owner: int, size: int, value: float,
    reported: Objective | None, window_ev: int,
) -> Finding:  # fmt: skip
    label = array_label(model, owner)
    by_grads = ev == call.begin_ev
    how = (
        f"`grads={{{label}: ...}}`"
        if by_grads
        else (f"`{label}.grad.fill_({value:g})`" if not np.isnan(value) else f"a write into `{label}.grad`")
    )
    if reported is not None and reported.weight is not None:
        where = model.event_location(reported.ev, "objective")
        ratio = value / reported.weight
        message = (
            f"backward without loss= seeded by hand with {how} on {size} elements backpropagates "
            f"{_seeded(label, value, size)}, but the program reduces "
            f"`{label}` with weight {reported.weight:g} per element{_kind(reported.weight, reported.size)} "
            f"({reported.how}, line {where.line}): every gradient is {ratio:g}x the gradient of the "
            f"objective it reports"
        )
        objective_ev = reported.ev
    else:
        message = (
            f"backward without loss= seeded by hand with {how} on {size} elements: the gradient is that of "
            f"the SUM of `{label}`, {size}x the gradient of their mean; if the objective you report or "
            f"minimize is the mean, every gradient is {size}x too large"
        )
        objective_ev = window_ev
    location = model.location(call.site, "backward") if by_grads else model.event_location(ev, "seed")
    related = [] if by_grads else [model.location(call.site, "backward")]
    related.append(model.event_location(objective_ev, "objective"))
    return finding(
        WT304,
        Severity.WARNING,
        message,
        location,
        related=related,
        evidence={"first_seq": int(model.seq[ev]), "array_id": int(owner), "size": int(size)},
        key=(location.file, location.line),
    )


def _seeded(label: str, value: float, size: int) -> str:
    if _same(value, 1.0):
        return f"the SUM of `{label}` (weight 1 per element)"
    return f"`{label}` with weight {value:g} per element{_kind(value, size)}"


def _kind(weight: float, size: int) -> str:
    """The name of a reduction with these weights: " (their sum)", " (their mean)", else ""."""
    if _same(weight, 1.0):
        return " (their sum)"
    if size > 0 and _same(weight, 1.0 / size):
        return " (their mean)"
    return ""


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-5 * max(abs(a), abs(b))


def _matches(value: float, objectives: list[Objective]) -> bool:
    """Whether the program reduces the seeded values with the seed's own weight somewhere."""
    return not np.isnan(value) and any(o.weight is not None and _same(o.weight, value) for o in objectives)


def _contradicted(value: float, objectives: list[Objective], call: BackwardCall) -> Objective | None:
    """The reduction (nearest the backward) whose weight differs from the seed's, when the
    seed's value is known and no reduction of the program uses that value; else None."""
    if np.isnan(value) or value == 0.0 or _matches(value, objectives):
        return None
    known = [o for o in objectives if o.weight is not None and o.weight != 0.0]
    if not known:
        return None
    return min(known, key=lambda o: (abs(o.ev - call.begin_ev), o.ev))


def _seed_value(model: Model, df: Dataflow, ev: int, call: BackwardCall) -> float:
    """The one value the seed puts in every element (a ``fill_``, or for ``grads=`` a copy from
    an array whose last write was one), NaN when the trace does not show it."""
    if model.kind[ev] == K[S.MEMSET]:
        return float(model.value[ev])
    if ev != call.begin_ev:
        return float("nan")
    values = set()
    for e in range(call.begin_ev + 1, min(call.end_ev, model.n_events)):
        if model.kind[e] == K[S.LAUNCH]:
            break  # grads= assigns its seeds before the first adjoint
        if model.kind[e] != K[S.COPY]:
            continue
        for row in access_rows(model, e):
            if not df.is_read[row] or model.acc_flags[row] & S.FLAG_GRAD:
                continue
            writers = df.writers_of_memory(int(model.acc_array[row]), int(model.seq[e]))
            writer = int(df.acc_ev[writers[0]]) if writers else -1
            values.add(
                float(model.value[writer]) if writer >= 0 and model.kind[writer] == K[S.MEMSET] else np.nan
            )
    return values.pop() if len(values) == 1 else float("nan")


_NOT_AN_OUTPUT = -2


def _objective_read(
    model: Model, df: Dataflow, owner: int, call: BackwardCall, cache: dict[int, tuple]
) -> int:
    """The event that forms, from the values of ``owner`` (its allocation) after their last write
    and before ``call``, an objective the backward does not differentiate; -1 when none shows,
    ``_NOT_AN_OUTPUT`` when the backward's recording never writes ``owner``.

    Either an untaped launch or native utility reducing them (it writes an array with fewer
    elements), or a host read (``.numpy()``, ``.list()``) on a line that takes their mean. A
    host read that only checks or prints the values forms no objective the trace can see.
    An array the replayed recording never writes (an input whose ``.grad`` is pre-filled to
    accumulate onto) is no output, and its fill no seed."""
    info = model.arrays.get(owner)
    if info is None:
        return _NOT_AN_OUTPUT
    found = cache.get(info.alloc_id)
    if found is None:
        rows = np.nonzero(model.acc_alloc == info.alloc_id)[0]
        evs = model.acc_ev[rows]
        rows, evs = rows[evs >= 0], evs[evs >= 0]
        value_read = model.kind[evs] == K[S.VALUE_READ]
        # a copy only moves the values (a snapshot of the outputs, as jacobian_fd takes)
        untaped = ~model.recorded[evs] & ~model.adjoint[evs] & (model.phase[evs] == S.FORWARD)
        untaped &= np.isin(model.kind[evs], [K[S.LAUNCH], K[S.NATIVE]])
        is_read = value_read | (untaped & ((model.acc_role[rows] & S.ROLE_READ) != 0))
        is_write = ((model.acc_role[rows] & S.ROLE_WRITE) != 0) & ~value_read & ~model.adjoint[evs]
        taped = is_write & model.recorded[evs]
        # rows are in seq order, so each of these is sorted by seq; an epoch's first taped write
        # tells whether it has one before any given seq
        taped_epochs = df.ev_epoch[evs[taped]]
        epochs, first = np.unique(taped_epochs, return_index=True)
        found = cache[info.alloc_id] = (
            evs[is_read], model.seq[evs[is_read]], model.seq[evs[is_write]], model.seq[evs[taped]],
            dict(zip(epochs.tolist(), first.tolist())),
        )  # fmt: skip
    read_evs, read_seqs, write_seqs, taped_seqs, first_taped = found
    first = first_taped.get(call.epoch)
    if first is None or taped_seqs[first] >= call.begin_seq:
        return _NOT_AN_OUTPUT  # not an output of what this backward replays
    before = int(np.searchsorted(write_seqs, call.begin_seq, side="left"))
    last_write = int(write_seqs[before - 1]) if before else -1
    lo = int(np.searchsorted(read_seqs, last_write, side="right"))
    hi = int(np.searchsorted(read_seqs, call.begin_seq, side="left"))
    for ev in read_evs[lo : max(lo, hi)].tolist():
        if model.kind[ev] == K[S.VALUE_READ]:
            if MEAN_LINE.search(model.event_location(ev).text):
                return int(ev)
        elif _reduces(model, ev, info.size):
            return int(ev)
    return -1


def _reduces(model: Model, ev: int, size: int) -> bool:
    """Whether event ``ev`` writes a (non-gradient) array with fewer than ``size`` elements."""
    for row in access_rows(model, ev):
        if model.acc_role[row] & S.ROLE_WRITE and not model.acc_flags[row] & S.FLAG_GRAD:
            written = model.arrays.get(int(model.acc_array[row]))
            if written is not None and written.size < size:
                return True
    return False


def _external_source(model: Model, df: Dataflow, ev: int, call: BackwardCall) -> bool:
    """Whether a seed copies from zero-copy framework memory (for ``grads=``: the assign inside
    the backward)."""
    events = [ev]
    if ev == call.begin_ev:
        events = [
            e
            for e in range(call.begin_ev + 1, min(call.end_ev, model.n_events))
            if model.kind[e] == K[S.COPY]
        ]
    for e in events:
        for row in access_rows(model, e):
            info = model.arrays.get(int(model.acc_array[row]))
            if df.is_read[row] and info is not None and info.kind == S.ARRAY_EXTERNAL:
                return True
    return False


RULE = Rule((WT304,), check)
