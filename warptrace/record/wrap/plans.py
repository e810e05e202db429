"""Launch plans: per kernel, the access rows a launch appends, from the kernel's facts.

Access roles come from the kernel (:func:`warptrace.record.kernels.kernel_facts`), not
from ``inputs=``/``outputs=``: Warp's own optimizers pass written arrays as inputs. For
an adjoint launch, the forward arrays are read (and written where the kernel
accumulates, since atomics replay), and each gradient argument gets the role that the
forward use of its array implies: a forward read accumulates into the gradient, a
forward store reads and consumes it (unless ``retain_grad``), a forward accumulation
reads it. Facts the analysis could not settle mark every array read and written,
uncertain.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import warp

from warptrace.record import state
from warptrace.record.kernels import kernel_facts, refresh_enable_backward
from warptrace.record.session import Recorder
from warptrace.record.wrap.common import WARP_ARRAY, mark
from warptrace.trace.schema import (
    FLAG_ACCUMULATE,
    FLAG_CONSUME,
    FLAG_FIELD,
    FLAG_GRAD,
    FLAG_NO_GRAD,
    FLAG_STORE,
    FLAG_UNCERTAIN,
    ROLE_NONE,
    ROLE_READ,
    ROLE_READWRITE,
    ROLE_WRITE,
)


class LaunchPlan:
    """Per-kernel access rows, precomputed so that a launch only looks up arrays.

    ``fwd`` rows: ``(arg index, name, field, path, role, flags)``; split into ``simple``
    (array arguments: ``(index, name, role, flags)``) and ``fields`` (struct fields, with
    their attribute ``path``) for the launch fast path.
    ``adj`` rows: ``(index, name, field, path, fwd_role, fwd_flags, grad_role, grad_flags,
    retained_grad_role, retained_grad_flags)``. ``name``/``field`` are
    :meth:`Recorder.name_code` codes.
    ``handles`` rows, for the arrays behind ``wp.Mesh``/``wp.Bvh``/``wp.Volume`` id arguments
    (:mod:`warptrace.record.kernel_handles`): ``(index, name, kind, field, role, flags, *adj)``, the
    forward launch's role and flags, then those of an adjoint launch as in ``adj`` rows
    (forward memory, gradient, retained gradient), ``name`` the code of
    "arg.field" ("mesh.points"). A plan with handles is recorded by the Python path.
    """

    __slots__ = ("adj", "facts", "fields", "fwd", "handles", "kernel_id", "simple")

    def __init__(self, rec: Recorder, kernel_id: int, facts: Any) -> None:
        self.kernel_id = kernel_id
        self.facts = facts
        uncertain = str(facts.analysis).startswith("failed")
        fwd: list[tuple[Any, ...]] = []
        adj: list[tuple[Any, ...]] = []
        for arg in facts.args:
            if not arg.is_array:
                continue
            path = tuple(arg.field.split(".")) if arg.field else None
            name, field_name = rec.name_code(arg.name), rec.name_code(arg.field or "")
            # a failed analysis guesses every argument; native code only those it reached
            opaque = uncertain or bool(getattr(arg, "opaque", False))
            fwd.append((arg.index, name, field_name, path, *_forward_role(arg, uncertain, opaque)))
            adj.append((arg.index, name, field_name, path, *_adjoint_roles(arg, uncertain, opaque)))
        self.fwd = tuple(fwd)
        self.adj = tuple(adj)
        self.simple = tuple((i, name, role, flags) for i, name, _, path, role, flags in fwd if path is None)
        self.fields = tuple(row for row in fwd if row[3] is not None)
        self.handles = tuple(_handle_row(rec, use) for use in getattr(facts, "handles", ()))


def _handle_row(rec: Recorder, use: Any) -> tuple[Any, ...]:
    """The plan row of one array behind a handle argument (see ``LaunchPlan.handles``)."""
    arg = SimpleNamespace(
        field="", read=use.read, write=use.store or use.accumulate, store=use.store, accumulate=use.accumulate
    )
    fwd_role, fwd_flags = _forward_role(arg, False, False)
    adj = list(_adjoint_roles(arg, False, False))
    if use.read and not use.gradient:
        fwd_flags |= FLAG_NO_GRAD
        adj[1] |= FLAG_NO_GRAD
        if not (use.store or use.accumulate):  # a query: its adjoint sends nothing to the array's gradient
            adj[2] = adj[4] = ROLE_NONE
    name = rec.name_code(f"{use.name}.{use.field}")
    return (use.index, name, use.kind, use.field, fwd_role, fwd_flags, *adj)


def _forward_role(arg: Any, uncertain: bool, opaque: bool) -> tuple[int, int]:
    base = (FLAG_FIELD if arg.field else 0) | (FLAG_UNCERTAIN if opaque else 0)
    if uncertain:
        return ROLE_READWRITE, base
    role = (ROLE_READ if arg.read else 0) | (ROLE_WRITE if arg.write else 0)
    flags = base
    if arg.store:
        flags |= FLAG_STORE
    if arg.write and arg.accumulate and not arg.store:
        flags |= FLAG_ACCUMULATE
    return role, flags


def _adjoint_roles(arg: Any, uncertain: bool, opaque: bool) -> tuple[int, int, int, int, int, int]:
    base = (FLAG_FIELD if arg.field else 0) | (FLAG_UNCERTAIN if opaque else 0)
    if uncertain:
        grad = (ROLE_READWRITE, base | FLAG_GRAD | FLAG_CONSUME)
        return ROLE_READWRITE, base, *grad, *grad
    # forward memory in the backward kernel: loads replay, atomics replay, stores do not
    fwd_role = (ROLE_READ if arg.read else 0) | (ROLE_WRITE if arg.accumulate else 0)
    fwd_flags = base | (FLAG_ACCUMULATE if arg.accumulate else 0)

    def grad_role(consume: bool) -> tuple[int, int]:
        role = ROLE_NONE
        flags = base | FLAG_GRAD
        if arg.read:  # adjoint of a load: atomic accumulation into the gradient
            role |= ROLE_WRITE
        if arg.accumulate:  # adjoint of an atomic: reads the gradient
            role |= ROLE_READ
        if arg.store:  # adjoint of a store: reads the gradient, then zeroes it
            role |= ROLE_READ
            if consume:
                role |= ROLE_WRITE
                flags |= FLAG_CONSUME
        if role & ROLE_WRITE and not (arg.store and consume):
            flags |= FLAG_ACCUMULATE
        return role, flags

    return fwd_role, fwd_flags, *grad_role(True), *grad_role(False)


def plan_for(rec: Recorder, kernel: Any, args: Sequence[Any] | None) -> LaunchPlan:
    if getattr(kernel, "is_generic", False):
        # The overload depends on the argument types: key on what Warp infers them from.
        key = (kernel, _type_key(kernel, args or ()))
        plan = state.generic_plans.get(key)
        if plan is None:
            facts = kernel_facts(kernel, args)
            hit = state.plans_by_facts.get(id(facts))
            if hit is not None and hit[0] is facts:
                plan = hit[1]
            else:
                plan = LaunchPlan(rec, rec.intern_kernel(facts), facts)
                state.plans_by_facts[id(facts)] = (facts, plan)
            state.generic_plans[key] = plan
            _planned(kernel)
        return plan
    plan = state.plans.get(kernel)
    if plan is None:
        facts = kernel_facts(kernel, args)
        plan = LaunchPlan(rec, rec.intern_kernel(facts), facts)
        state.plans[kernel] = plan
        _planned(kernel)
    return plan


def _planned(kernel: Any) -> None:
    """Index a planned kernel by (module, key), for :func:`make_register_kernel`."""
    owner = getattr(kernel, "generic_parent", None) or kernel  # an overload goes with its template
    with contextlib.suppress(Exception):
        state.planned.setdefault((getattr(owner, "module", None), owner.key), set()).add(owner)


def make_mark_modified(original: Callable[..., Any]) -> Callable[..., Any]:
    """``Module.mark_modified``, which ``wp.set_module_options`` calls: when the module's
    ``enable_backward`` changed, its kernels get new facts and plans, so launches from now on
    name a ``kernels`` row with the value Warp builds them with (the earlier ones keep theirs)."""

    def mark_modified(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        rec = state.rec
        if rec is not None:
            try:
                changed = refresh_enable_backward(self)
                for kernel in changed:
                    state.plans.pop(kernel, None)
                for key in [key for key in state.generic_plans if key[0] in changed]:
                    del state.generic_plans[key]
            except Exception as exc:
                rec.fail(exc)
        return result

    return mark(original, mark_modified)


def make_register_kernel(original: Callable[..., Any]) -> Callable[..., Any]:
    """``Module.register_kernel``, which every new ``wp.Kernel`` calls: when the new kernel
    replaces one of the same key (``importlib.reload`` of the module, a kernel factory called
    again), the plans of the replaced kernel are dropped, so the recorder does not keep it
    alive. Warp's module hash covers every live kernel object of the module
    (``Module._live_kernels``, a WeakSet): a replaced kernel kept alive keeps its old source
    in the hash (``warp.tests.aot.test_module_aot`` ``test_enable_hashing`` failed traced only)."""

    def register_kernel(self: Any, kernel: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, kernel, *args, **kwargs)
        try:
            # Warp empties ``Module.kernels`` when it sees the Python module reloaded, so the
            # replaced kernels are found in the recorder's own index
            replaced = state.planned.pop((self, kernel.key), ())
        except Exception:
            replaced = ()
        for old in replaced:
            if old is not kernel:
                forget_kernel(old)
        return result

    return mark(original, register_kernel)


def forget_kernel(kernel: Any) -> None:
    """Drop the session's plans of ``kernel`` and of its overloads (planned again if it is
    launched again)."""
    overloads = getattr(kernel, "overloads", None)
    for each in (kernel, *(overloads.values() if isinstance(overloads, dict) else ())):
        state.plans.pop(each, None)
    state.generic_args.pop(kernel, None)
    for key in [key for key in list(state.generic_plans) if key[0] is kernel]:
        state.generic_plans.pop(key, None)


def _generic_positions(kernel: Any, count: int) -> tuple[int, ...] | None:
    """Indices of the arguments whose annotation is generic (None: look at all of them).

    Warp infers an overload's types only from those; the other arguments keep their
    annotated type whatever is passed.
    """
    try:
        types = list(kernel.adj.arg_types.values())
        if len(types) != count:
            return None
        is_generic = warp._src.types.type_is_generic
        return tuple(i for i, t in enumerate(types) if is_generic(t))
    except Exception:
        return None


def _type_key(kernel: Any, args: Sequence[Any]) -> tuple[Any, ...]:
    """Python type, plus dtype/ndim for arrays and the struct class for structs, of the generic arguments."""
    if kernel in state.generic_args:
        positions = state.generic_args[kernel]
    else:
        positions = _generic_positions(kernel, len(args))
        state.generic_args[kernel] = positions
    key = []
    for i in positions if positions is not None else range(len(args)):
        value = args[i]
        kind = value.__class__
        if kind is WARP_ARRAY:
            key.append((value.dtype, value.ndim))
        else:
            cls = getattr(value, "_cls", None)
            key.append(kind if cls is None else cls)
    return tuple(key)


def dim_code_of(rec: Recorder, dim: Any) -> int:
    """Recorder.dim_code of the launch dims "64" / "32x3" (-1 for None)."""
    try:
        code = state.dims.get(dim)
    except TypeError:  # a list
        dim = tuple(dim)
        code = state.dims.get(dim)
    if code is None:
        if isinstance(dim, int):
            text = str(dim)
        elif dim is None:
            return -1
        else:
            text = "x".join(str(int(d)) for d in dim)
        code = rec.dim_code(text)
        state.dims[dim] = code
    return code


__all__ = [
    "LaunchPlan",
    "dim_code_of",
    "forget_kernel",
    "make_mark_modified",
    "make_register_kernel",
    "plan_for",
]
