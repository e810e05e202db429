"""What rule modules share: the :class:`Rule` record, finding construction, the phrasing
of names in messages, and small questions about accesses and gradient paths.

A helper used by two rules lives here, once; a helper used by one rule stays in that
rule's module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from warptrace.analysis.dataflow import BackwardCall, Dataflow, Epoch
from warptrace.analysis.findings import Finding, Location, RuleInfo, Severity
from warptrace.analysis.model import Model

__all__ = [
    "DOC_ACCUMULATION",
    "DOC_CUSTOM_GRAD",
    "DOC_CUSTOM_REPLAY",
    "DOC_DEBUG",
    "DOC_LIMITS",
    "DOC_OVERWRITES",
    "DOC_TRACKING",
    "Rule",
    "access_rows",
    "arg_path",
    "array_label",
    "backpropagated",
    "differentiable_dtype",
    "differentiable_reads",
    "finding",
    "join_names",
    "memory_key",
    "quote",
    "shared",
]

# Sections of Warp's documentation the findings point at.
DOC_OVERWRITES = "Differentiability > Array Overwrites"
DOC_TRACKING = "Differentiability > Array Overwrite Tracking"
DOC_ACCUMULATION = "Differentiability > Gradient accumulation"
DOC_DEBUG = "Differentiability > Debugging Gradients"
DOC_LIMITS = "Differentiability > Limitations and Workarounds"
DOC_CUSTOM_GRAD = "Differentiability > Custom Gradient Functions"
DOC_CUSTOM_REPLAY = "Differentiability > Custom Replay Functions"


@dataclass(frozen=True)
class Rule:
    """One entry of the registry: the codes a check can report, and the check itself.

    ``check`` is a pure function of the model; the module that defines the rule holds its
    user documentation in its docstring. ``review``, for a rule whose finding depends on the
    others (a consequence that names its cause), runs after every ``check``: it gets the
    findings of all rules and returns them, its own completed."""

    infos: tuple[RuleInfo, ...]
    check: Callable[[Model], list[Finding]]
    review: Callable[[list[Finding]], list[Finding]] | None = None

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(info.code for info in self.infos)


T = TypeVar("T")


def shared(model: Model, key: str, build: Callable[[Model], T]) -> T:
    """``build(model)``, computed once per model: a derived view two rules use (the launches
    after the loss, the overwrite windows), whichever of them runs first builds it."""
    views = model.derived.setdefault("shared", {})
    if key not in views:
        views[key] = build(model)
    return views[key]  # type: ignore[no-any-return,unused-ignore]


def finding(info: RuleInfo, severity: Severity, message: str, location: Location, **extra: Any) -> Finding:
    """A finding of rule ``info`` with its fix and documentation section."""
    return Finding(
        code=info.code,
        name=info.name,
        severity=severity,
        message=message,
        location=location,
        fix=info.fix,
        doc=info.doc,
        **extra,
    )


def join_names(labels: Any) -> str:
    """```a`, `b``` for the distinct non-empty labels, in order; "an array" when none."""
    unique = list(dict.fromkeys(label for label in labels if label))
    return ", ".join(f"`{label}`" for label in unique) or "an array"


def quote(name: str) -> str:
    return f"`{name}`"


def arg_path(arg: str, field_path: str) -> str:
    """``arg`` or ``arg.field.path``: how the kernel source names the array."""
    return f"{arg}.{field_path}" if field_path else arg


def array_label(model: Model, array_id: int) -> str:
    return model.array_label(int(array_id))


def access_rows(model: Model, ev: int) -> range:
    """The access rows of event ``ev``."""
    return range(int(model.acc_start[ev]), int(model.acc_stop[ev]))


def memory_key(model: Model, array_id: int) -> tuple[int, int, int]:
    """(allocation, first byte, end byte) of an array's memory; unknown arrays get their own key."""
    info = model.arrays.get(int(array_id))
    if info is None:
        return (-1, int(array_id), 0)
    lo, hi = info.hull
    return (info.alloc_id, lo, hi)


def differentiable_dtype(dtype: str) -> bool:
    """Floating-point element types carry gradients; integers and booleans do not."""
    text = dtype.lower()
    if "int" in text or "bool" in text:
        return False
    # vec3i, mat22b, ...: integer and boolean composites
    return not (text.startswith(("vec", "mat", "quat", "transform", "spatial")) and text[-1:] in ("i", "b"))


def backpropagated(df: Dataflow) -> list[tuple[Epoch, BackwardCall]]:
    """Each tape epoch with a backward, and its first backward call."""
    out = []
    for epoch in df.epochs:
        if epoch.backwards and epoch.events:
            out.append((epoch, df.backward_calls[epoch.backwards[0]]))
    return out


def differentiable_reads(model: Model, df: Dataflow, ev: int, when: int) -> list[int]:
    """Arrays with a gradient that event ``ev`` reads (its differentiable inputs)."""
    out = []
    for row in access_rows(model, ev):
        if df.is_read[row] and not df.grad_row_mask[row]:
            array_id = int(model.acc_array[row])
            if df.has_grad(array_id, when):
                out.append(array_id)
    return out
