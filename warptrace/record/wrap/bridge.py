"""Framework bridges: memory shared with PyTorch, JAX, DLPack consumers and the array
interface protocols.

An export (``wp.to_torch``, ``wp.to_jax``, ``wp.to_dlpack`` and so ``__dlpack__``,
``__array_interface__``, ``__cuda_array_interface__``) is one BRIDGE event whose access
rows read the array (and its ``.grad`` when the export shares it, as ``to_torch`` does
for an array that requires grad). An import (``wp.from_torch``, ``from_jax``,
``from_dlpack``) is one BRIDGE event naming the new array (and its grad) with role
``ROLE_NONE``. Either way the other framework may read or write that memory at any later
time, invisibly; the analyzer treats it conservatively where that matters.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from warptrace.record import state
from warptrace.record.wrap.common import WARP_ARRAY, access_row, current_tape, guarded_call, mark
from warptrace.trace.schema import BRIDGE, BRIDGE_EXPORT, BRIDGE_IMPORT, FLAG_GRAD, ROLE_NONE, ROLE_READ

_DETAIL: dict[tuple[str, str], str] = {}


def _detail(framework: str, direction: str) -> str:
    key = (framework, direction)
    if key not in _DETAIL:
        _DETAIL[key] = json.dumps({"framework": framework, "direction": direction})
    return _DETAIL[key]


def _shared_grad(arr: Any, kwargs: dict[str, Any], args: tuple[Any, ...]) -> Any:
    """The ``.grad`` a ``to_torch``/``to_jax``-style export shares too (None when it does not)."""
    requires = args[1] if len(args) > 1 else kwargs.get("requires_grad")
    if requires is None:
        requires = getattr(arr, "requires_grad", False)
    grad = getattr(arr, "grad", None) if requires else None
    return grad if isinstance(grad, WARP_ARRAY) else None


def _emit(direction: str, framework: str, arrays: list[tuple[Any, bool]]) -> None:
    rec = state.rec
    if rec is None:
        return
    try:
        ts = rec.local.state
    except AttributeError:
        ts = rec.thread_state()
    try:
        role = ROLE_READ if direction == BRIDGE_EXPORT else ROLE_NONE
        accesses = tuple(
            access_row(rec, arr, role, FLAG_GRAD if is_grad else 0)
            for arr, is_grad in arrays
            if arr is not None
        )
        if not accesses:
            return
        rec.emit(
            BRIDGE,
            tape=current_tape(rec, ts),
            site=rec.sites.caller(),
            array_id=accesses[0][0],
            detail=_detail(framework, direction),
            accesses=accesses,
        )
    except Exception as exc:
        rec.fail(exc)


def make_export(original: Callable[..., Any], framework: str, with_grad: bool) -> Callable[..., Any]:
    """``wp.to_torch``/``to_jax``/``to_dlpack``: the array (and maybe its grad) handed out."""

    def export(*args: Any, **kwargs: Any) -> Any:
        rec = state.rec
        if rec is None:
            return original(*args, **kwargs)
        try:
            ts = rec.local.state
        except AttributeError:
            ts = rec.thread_state()
        if ts.guard:
            return original(*args, **kwargs)
        result = guarded_call(ts, original, *args, **kwargs)
        arr = args[0] if args else next(iter(kwargs.values()), None)
        if isinstance(arr, WARP_ARRAY):
            grad = _shared_grad(arr, kwargs, args) if with_grad else None
            _emit(BRIDGE_EXPORT, framework, [(arr, False), (grad, True)])
        return result

    return mark(original, export)


def make_import(original: Callable[..., Any], framework: str) -> Callable[..., Any]:
    """``wp.from_torch``/``from_jax``/``from_dlpack``: a Warp array over another framework's memory."""

    def import_(*args: Any, **kwargs: Any) -> Any:
        rec = state.rec
        if rec is None:
            return original(*args, **kwargs)
        try:
            ts = rec.local.state
        except AttributeError:
            ts = rec.thread_state()
        if ts.guard:
            return original(*args, **kwargs)
        result = guarded_call(ts, original, *args, **kwargs)
        if isinstance(result, WARP_ARRAY):
            grad = result.__dict__.get("_grad")
            _emit(
                BRIDGE_IMPORT,
                framework,
                [(result, False), (grad if isinstance(grad, WARP_ARRAY) else None, True)],
            )
        return result

    return mark(original, import_)


def wrap_interface(prop: property, framework: str) -> property:
    """``__array_interface__``/``__cuda_array_interface__``: reading the property hands the memory out."""
    getter = prop.fget
    if getter is None:
        return prop

    def interface(self: Any) -> Any:
        rec = state.rec
        if rec is None:
            return getter(self)
        try:
            ts = rec.local.state
        except AttributeError:
            ts = rec.thread_state()
        if ts.guard:
            return getter(self)
        result = guarded_call(ts, getter, self)
        _emit(BRIDGE_EXPORT, framework, [(self, False)])
        return result

    return property(mark(getter, interface), prop.fset, prop.fdel, prop.__doc__)


__all__ = ["make_export", "make_import", "wrap_interface"]
