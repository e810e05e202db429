"""An atomic's returned value used where the adjoint reads it, with no replay function (WT405).

WT405 replay-side-effect
    Summary: an atomic's returned value used as an index, in a branch or as a factor, with no `@wp.func_replay`
    Severity: error on a backpropagated tape where the trace shows a gradient through the use (the
    array indexed, the other operand of the product; any branch); info otherwise on a tape, and
    where a float atomic's old value is stored into a differentiable array; silent outside tapes
    Proves:
        A kernel uses the old value a ``wp.atomic_*`` returns as an index (``slot =
        wp.atomic_add(count, 0, 1)``; ``out[slot] = ...``), in a branch (``if
        wp.atomic_cas(owner, c, -1, i) == -1:``) or as a factor of a differentiable value
        (``float(k) * x[i]``), and has no ``@wp.func_replay`` for it: the backward does not see
        the value the forward pass got.
    Mechanism:
        The adjoint kernel re-runs the forward statements to rebuild the values it needs, but not
        an atomic of the kernel body (the builtins are ``skip_replay``): Warp 1.19 leaves the
        variable holding its returned value unassigned there, so the adjoint reads an undefined
        value (measured for add/sub/min/max/exch/cas: every thread read the adjoint of slot 0; a
        branch on it took the other side; ``float(k) * x[i]`` gave ``d/dx = 0`` or NaN). The old
        value has no adjoint either (``adj_atomic_*`` ignore it). Inside a ``@wp.func`` the
        replay runs the atomic again and the counter keeps counting: WT308 proves that case from
        the trace, so WT405 reports a function's atomic only when the trace holds no adjoint
        launch of the kernel to prove it; a value the function returns is judged where its
        callers use it.
    Evidence:
        The kernel-source model (how each atomic's returned value is used, through locals and
        the functions that return it; ``@wp.func_replay`` functions), the launch on a tape,
        whether that tape is backpropagated and which kernel arguments carry a gradient there.
    Example: wt405_compact
    Fix:
        Compute the slots in a separate, untaped launch and pass them in as an array, or move the
        atomic into a ``@wp.func`` with a ``@wp.func_replay`` that returns the stored slot.
    Silent on:
        The returned old value stored as data (``ids[i] = wp.atomic_add(count, 0, 1)``, ``out[i] =
        wp.atomic_min(slot, i, v[i])``), added or cast: their adjoints never read it (measured
        exact); atomics used only to accumulate (``wp.atomic_add(loss, 0, v)``); a function with a
        ``@wp.func_replay`` that returns the slot recorded in the forward pass; counters outside
        the tape.
    Look-alikes: ok_src_replay, ok_flow_counter_untaped, ok_src_atomic_old_value,
        ok_src_atomic_old_value_func, ok_src_atomic_old_value_method
    Warp documentation:
        "Differentiability", section "Custom Replay Functions".
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from warptrace.analysis.findings import Finding, RuleInfo, Severity
from warptrace.analysis.model import K, Model
from warptrace.analysis.rules.common import DOC_CUSTOM_REPLAY, Rule, shared
from warptrace.analysis.rules.kernel_uses import (
    KernelUse,
    evidence_phrase,
    kernel_uses,
    source_finding,
    strongest,
)
from warptrace.kernel_source import FUNC, KERNEL, AtomicCall, FunctionFacts
from warptrace.kernel_source.result_uses import BRANCH, FACTOR, INDEX, VALUE
from warptrace.trace import schema as S

WT405 = RuleInfo(
    code="WT405",
    name="replay-side-effect",
    family="kernel",
    fix="compute the slots in an untaped launch and pass them in as an array, or put the atomic in a "
    "@wp.func with a @wp.func_replay that returns the slot recorded in the forward pass",
    doc=DOC_CUSTOM_REPLAY,
)

_BROKEN = (INDEX, BRANCH, FACTOR)
_HOW = {
    INDEX: "uses as an index",
    BRANCH: "tests in a branch",
    FACTOR: "multiplies a differentiable value by",
}
_ROOT = re.compile(r"[A-Za-z_]\w*")
_FIX_STORED = (
    "nothing to change unless the loss depends on the stored old value through the atomic's array: "
    "then read the old values in a launch of their own (or from a copy of the array taken before) "
    "instead of using what the atomic returns"
)

# (function, kind, partner names): one use of an atomic's value, in the function holding it
Site = tuple[FunctionFacts, str, tuple[str, ...]]


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
                if atomic.result_used:
                    found = _finding(model, use, function, atomic)
                    if found is not None:
                        findings.append(found)
    return strongest(findings)


def _finding(model: Model, use: KernelUse, function: FunctionFacts, atomic: AtomicCall) -> Finding | None:
    sites = _sites(use, function, atomic)
    broken = [site for site in sites if site[1] in _BROKEN]
    if broken:
        proven = [site for site in broken if site[1] == BRANCH or _carried(use, site[0], site[2])]
        severity = Severity.ERROR if use.backpropagated and proven else Severity.INFO
        kind = (proven or broken)[0][1]
        args = use.grad_args if severity == Severity.ERROR else frozenset()
        replays = function.role == FUNC
        message = (
            f"the kernel {_HOW[kind]} the value `{atomic.name}` on `{atomic.array}` returns (a counter "
            "or slot): "
            + (
                "the replay runs the function again, so the atomic hands out another value"
                if replays
                else "the adjoint does not replay the atomic, so that value is undefined there"
            )
            + (
                ", and adjoints are read from and written to the wrong elements; "
                if kind == INDEX
                else ", and the adjoint takes a branch the forward pass did not; "
                if kind == BRANCH
                else ", and the other operand's adjoint is computed with it; "
            )
            + evidence_phrase(model, use, args)
        )
        return source_finding(model, WT405, severity, use, function, atomic.line, message, "atomic")
    # stored as data: exact, but the old value carries no gradient into the atomic's array
    root = _ROOT.match(atomic.array)
    if root is None or not _carried(use, function, (root.group(),)):
        return None
    into = sorted(
        {name for f, kind, partners in sites if kind == VALUE for name in _carried(use, f, partners)}
    )
    if not into:
        return None
    message = (
        f"the old value `{atomic.name}` returns is stored into `{'`, `'.join(into)}`: it carries no "
        f"gradient (Warp drops its adjoint), so no gradient flows back through it to the earlier "
        f"values of `{atomic.array}`; other gradients are exact"
    )
    found = source_finding(model, WT405, Severity.INFO, use, function, atomic.line, message, "atomic")
    return replace(found, fix=_FIX_STORED)


def _carried(use: KernelUse, function: FunctionFacts, names: tuple[str, ...]) -> frozenset[str]:
    """The gradient-carrying kernel arguments among ``names`` of ``function``: a kernel
    parameter is its own argument (an array indexed or stored into: what was stored into it
    is not what its adjoint reads), any other name what its value depends on."""
    if not use.backpropagated:
        return frozenset()
    if function.role == KERNEL:
        own = frozenset(name for name in names if name in function.params)
        rest = tuple(name for name in names if name not in own)
        return (own & use.grad_args) | use.carries(function, rest)
    return use.carries(function, names)


def _sites(use: KernelUse, function: FunctionFacts, atomic: AtomicCall) -> list[Site]:
    """Every use of the atomic's value: in its function, and where a ``@wp.func`` returns it,
    at its callers (transitively)."""
    sites: list[Site] = [(function, kind, partners) for kind, partners in atomic.uses]
    todo = [function] if atomic.returned and function.role == FUNC else []
    seen: set[int] = set()
    while todo:
        callee = todo.pop()
        if id(callee) in seen:
            continue
        seen.add(id(callee))
        for caller, found in use.source.returned_value_uses(callee):
            sites += [(caller, kind, partners) for kind, partners in found.uses]
            if found.returned and caller.role == FUNC:
                todo.append(caller)
    return sites


def _adjoint_kernels(model: Model) -> set[int]:
    """Kernels with an adjoint launch in the trace (WT308 judges their replayed side effects)."""
    mask = (model.kind == K[S.LAUNCH]) & model.adjoint
    return {int(k) for k in np.unique(model.kernel[mask]).tolist()}


RULE = Rule((WT405,), check)
