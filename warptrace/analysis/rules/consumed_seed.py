"""A seed buffer zeroed by the backward it seeds, then installed again (WT311).

WT311 consumed-seed
    Summary: a seed installed as an output's gradient is zeroed by the backward, then reused
    Severity: error
    Proves:
        A buffer installed as an output's gradient (``y.grad = seed``, ``y.grad =
        wp.from_torch(seed)``, ``y = wp.from_torch(out, grad=seed)``, or
        ``tape.backward(grads={y: seed})`` for a ``y`` without a gradient, which adopts
        ``seed``) *is* ``y.grad`` during the backward, which zeroes it in place; the seed is
        then installed again for a later backward (a module-level ``ones``, a torch
        ``grad_output`` the caller keeps and passes to every ``backward``) and seeds it with
        zeros: the first gradient is right, every later one is zero where the store consumed it
        (checked on Warp 1.19 with torch 2.13).
    Mechanism:
        Since Warp 1.13 the adjoint of a plain store ``y[i] = ...`` consumes the output
        gradient: it zeroes ``y.grad[i]`` after reading it.
    Evidence:
        The seed's memory is consumed by an adjoint launch after one installation, and is
        installed again, unchanged since, then read by a later backward. Unchanged is proven
        for Warp memory by the trace (no write to it between the consumption and the new
        installation), and for a torch tensor by the recorder's facts: the same tensor object
        with the same version counter (torch bumps it on every in-place change it makes).
    Example: wt311_torch_module_seed
    Fix:
        Hand the seed to the backward as a copy: ``tape.backward(grads={y: seed})`` with ``y``
        allocated with ``requires_grad=True`` (Warp copies the seed into ``y.grad``), or
        ``y.grad.assign(seed)``, or install a fresh clone each time.
    Silent on:
        A fresh seed per backward (the ``grad_output`` torch hands a Function for each
        ``loss.backward()``), a seed refilled in between (``seed.fill_(1.0)``, torch's
        ``seed.fill_``), ``tape.backward(grads={y: seed})`` for a ``y`` that has a gradient
        (Warp copies the seed into it), ``retain_grad`` (no consumption), and memory the trace
        cannot follow (a Warp array over torch memory imported once and reused, a buffer the
        host holds a numpy view of: their writers are invisible).
    Look-alikes: ok_bridge_fresh_seed, ok_bridge_seed_refilled
    Warp documentation:
        "Differentiability" (``Tape.backward``; "Array Overwrites": stores consume output
        gradients), "Interoperability", section "PyTorch".
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from warptrace.analysis.bridges import Bridges, bridges_of, import_label
from warptrace.analysis.dataflow import Dataflow, dataflow_of
from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import K, Model
from warptrace.analysis.rules.common import DOC_OVERWRITES, Rule, finding
from warptrace.trace import schema as S

WT311 = RuleInfo(
    code="WT311",
    name="consumed-seed",
    family="flow",
    fix="hand the seed over as a copy: tape.backward(grads={y: seed}) with y allocated with "
    "requires_grad=True, or y.grad.assign(seed), or install a fresh clone for each backward",
    doc="Tape.backward; " + DOC_OVERWRITES + "; Interoperability > PyTorch",
)


class Install(NamedTuple):
    """An event that makes ``seed`` the gradient of ``owner``."""

    ev: int
    owner: int
    seed: int


def check(model: Model) -> list[Finding]:
    bridges = bridges_of(model)
    installs = [
        Install(ev, int(model.array_id[ev]), int(model.ref_id[ev]))
        for ev in np.nonzero((model.kind == K[S.SET_GRAD]) & (model.ref_id >= 0))[0].tolist()
    ]
    # wp.from_torch(y, grad=seed): the import makes the torch tensor ``seed`` y's gradient
    installs += [
        Install(found.ev, found.array_id, found.grad_id)
        for found in bridges.imports
        if found.grad_id >= 0 and found.grad_tensor >= 0 and not found.leaf
    ]
    if len(installs) < 2:
        return []
    installs.sort()
    df = dataflow_of(model)
    by_identity: dict[tuple, list[Install]] = {}
    findings = []
    for install in installs:
        identity = _identity(model, bridges, install.seed)
        if identity is None:
            continue
        earlier = by_identity.setdefault(identity, [])
        if earlier:
            found = _zeroed(model, df, bridges, identity, earlier[-1], install)
            if found is not None:
                findings.append(_finding(model, df, bridges, earlier[-1], install, *found))
        earlier.append(install)
    return findings


def _identity(model: Model, bridges: Bridges, seed: int) -> tuple | None:
    """What names the seed's memory across installations: a torch tensor object and its version,
    or a Warp allocation whose every writer the trace sees; None when neither holds."""
    token, version = bridges.tensor_of(seed)
    if token >= 0:
        return ("torch", token, version)
    info = model.arrays.get(seed)
    if info is None or info.alloc_id < 0:
        return None
    if info.alloc_id in bridges.shared_allocs or info.alloc_id in bridges.host_views:
        return None  # another framework or the host may write it, invisibly
    if info.kind in (S.ARRAY_EXTERNAL, S.ARRAY_PREEXISTING, S.ARRAY_OPAQUE):
        return None
    return ("warp", info.alloc_id, *info.hull)


def _zeroed(
    model: Model, df: Dataflow, bridges: Bridges, identity: tuple, first: Install, again: Install
) -> tuple[int, int] | None:
    """(the adjoint launch that consumed the seed installed by ``first``, the adjoint launch of a
    later backward that reads the seed installed again by ``again``), when nothing wrote the
    seed's memory between that consumption and that read; else None."""
    first_seq, again_seq = int(model.seq[first.ev]), int(model.seq[again.ev])
    rows = df.writes_between(first.seed, first_seq, again_seq)
    consumed = (model.acc_flags[rows] & S.FLAG_CONSUME) != 0 if len(rows) else np.zeros(0, dtype=bool)
    hits = np.nonzero(consumed)[0]
    if not len(hits):
        return None
    consumer = int(df.acc_ev[rows[hits[-1]]])
    if len(rows) > hits[-1] + 1:
        return None  # written again after the consumption (refilled)
    user = -1
    for row in df.iter_reads(again.seed, again_seq):
        ev = int(df.acc_ev[row])
        if model.adjoint[ev]:
            user = ev
            break
        if model.kind[ev] != K[S.BRIDGE]:
            return None  # read by something else first: not (only) a seed
    if user < 0:
        return None
    refilled = df.writes_between(again.seed, again_seq, int(model.seq[user]))
    if len(refilled):
        return None  # written after the installation (grads= copied into it, a fill)
    if identity[0] == "torch" and _torch_writes(model, df, bridges, identity[1], consumer, user):
        return None
    return consumer, user


def _torch_writes(
    model: Model, df: Dataflow, bridges: Bridges, token: int, after_ev: int, before_ev: int
) -> bool:
    """Whether Warp wrote the torch tensor ``token`` (through any array imported over it) between
    the two events, other than by consuming it."""
    after, before = int(model.seq[after_ev]), int(model.seq[before_ev])
    for found in bridges.imports:
        for array_id, tensor in ((found.array_id, found.tensor), (found.grad_id, found.grad_tensor)):
            if tensor != token or array_id < 0:
                continue
            rows = df.writes_between(array_id, after, before)
            if len(rows) and np.any((model.acc_flags[rows] & S.FLAG_CONSUME) == 0):
                return True
    return False


def _finding(
    model: Model, df: Dataflow, bridges: Bridges, first: Install, again: Install, consumer: int, user: int
) -> Finding:
    owner_label = import_label(model, bridges, again.owner)
    torch_seed = bridges.tensor_of(again.seed)[0] >= 0
    call = int(df.ev_backward[consumer])
    zeroed_at = (
        model.location(df.backward_calls[call].site, "backward that zeroed it")
        if call >= 0
        else model.event_location(consumer, "backward that zeroed it")
    )
    later = int(df.ev_backward[user])
    used_at = (
        model.location(df.backward_calls[later].site, "backward seeded with zeros")
        if later >= 0
        else model.event_location(user, "backward seeded with zeros")
    )
    same = (
        "the same torch tensor, unchanged by torch since (its version counter)"
        if torch_seed
        else "the same memory, not written since"
    )
    message = (
        f"`{owner_label}.grad` is set to a seed that an earlier backward (line {zeroed_at.line}) already "
        f"zeroed: it is {same}, and the adjoint of the store into `{owner_label}` "
        f"(`{model.kernel_name(consumer)}`) consumed it (stores zero the output gradient they read); "
        f"this backward starts from zeros, so every gradient it computes through `{owner_label}` is 0"
    )
    location = model.event_location(again.ev, "seed")
    return finding(
        WT311,
        Severity.ERROR,
        message,
        location,
        related=[zeroed_at, model.event_location(first.ev, "first installed"), used_at],
        evidence={
            "first_seq": int(model.seq[again.ev]),
            "array_id": again.seed,
            "consumed_seq": int(model.seq[consumer]),
        },
        key=(location.file, location.line),
    )


RULE = Rule((WT311,), check)
