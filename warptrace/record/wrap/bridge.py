"""Framework bridges: memory shared with PyTorch, JAX, DLPack consumers and the array
interface protocols.

An export (``wp.to_torch``, ``wp.to_jax``, ``wp.to_dlpack`` and so ``__dlpack__``,
``__array_interface__``, ``__cuda_array_interface__``) is one BRIDGE event whose access
rows read the array (and its ``.grad`` when the export shares it, as ``to_torch`` does
for an array that requires grad). An import (``wp.from_torch``, ``from_jax``,
``from_dlpack``) is one BRIDGE event naming the new array (and its grad) with role
``ROLE_NONE``. Either way the other framework may read or write that memory at any later
time, invisibly; the analyzer treats it conservatively where that matters.

A PyTorch import also says which torch tensors are behind the Warp array and its grad
(:func:`_torch_facts`): a token per tensor object and its version counter (torch bumps it on
every in-place change it makes, Warp's writes through the pointer do not), and whether the
grad Warp made is the ``.grad`` of a torch leaf that requires grad. For such a leaf a hook
records each time torch's autograd accumulates a gradient into the leaf's ``.grad`` (an
"accumulate" BRIDGE event, no access rows): then two writers share that memory, Warp's
adjoint and torch's accumulation.
"""

from __future__ import annotations

import json
import os
import sys
import weakref
from collections.abc import Callable
from typing import Any

from warptrace.record import state
from warptrace.record.wrap.common import WARP_ARRAY, access_row, current_tape, guarded_call, mark
from warptrace.trace.schema import (
    BRIDGE,
    BRIDGE_ACCUMULATE,
    BRIDGE_EXPORT,
    BRIDGE_IMPORT,
    FLAG_GRAD,
    ROLE_NONE,
    ROLE_READ,
)

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


def _emit(
    direction: str, framework: str, arrays: list[tuple[Any, bool]], facts: dict[str, Any] | None = None
) -> None:
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
        detail = (
            json.dumps({"framework": framework, "direction": direction, **facts})
            if facts
            else _detail(framework, direction)
        )
        rec.emit(
            BRIDGE,
            tape=current_tape(rec, ts),
            site=rec.sites.caller(),
            array_id=accesses[0][0],
            detail=detail,
            accesses=accesses,
        )
    except Exception as exc:
        rec.fail(exc)


# ---------------------------------------------------------------- PyTorch tensors behind an import
def _token(tensor: Any) -> int:
    """The session's number for one torch tensor object (an ``id`` is reused after the tensor
    is freed; the weak reference drops the entry then, so a later tensor gets a new number)."""
    key = id(tensor)
    known = state.torch_tokens.get(key)
    if known is not None and known[0]() is tensor:
        return int(known[1])
    tokens = state.torch_tokens
    token = state.torch_next[0]
    state.torch_next[0] = token + 1

    def forget(_ref: Any, key: int = key, tokens: dict[int, tuple[Any, int]] = tokens) -> None:
        tokens.pop(key, None)

    try:
        ref = weakref.ref(tensor, forget)
    except TypeError:
        return -1
    tokens[key] = (ref, token)
    return token


def _torch_facts(args: tuple[Any, ...], kwargs: dict[str, Any], result: Any) -> dict[str, Any]:
    """Which torch tensors an import's Warp array and its grad live in: ``tensor``/``version``
    (the source), ``grad_tensor``/``grad_version`` (the tensor holding the grad memory: a
    ``grad=`` tensor, or the source's ``.grad``), ``leaf`` (the grad is the ``.grad`` of a
    torch leaf that requires grad: torch's autograd accumulates into that memory too)."""
    tensor = args[0] if args else kwargs.get("t")
    if tensor is None or not hasattr(tensor, "_version"):
        return {}
    facts: dict[str, Any] = {"tensor": _token(tensor), "version": int(tensor._version)}
    grad = result.__dict__.get("_grad")
    if not isinstance(grad, WARP_ARRAY) or grad.ptr is None:
        return facts
    holder = grad.__dict__.get("_tensor")
    own = getattr(tensor, "grad", None)
    if holder is None and own is not None and own.data_ptr() == grad.ptr:
        holder = own  # Warp allocated the grad and made it the tensor's .grad (to_torch)
    if holder is None or not hasattr(holder, "_version"):
        return facts
    facts["grad_tensor"] = _token(holder)
    facts["grad_version"] = int(holder._version)
    if own is holder and tensor.is_leaf and tensor.requires_grad:
        facts["leaf"] = True
        _watch_leaf(tensor, facts["tensor"])
    return facts


_TORCH_DIRS: tuple[str, ...] = ()


def _torch_dirs() -> tuple[str, ...]:
    global _TORCH_DIRS
    if not _TORCH_DIRS:
        torch = sys.modules.get("torch")
        path = getattr(torch, "__file__", None)
        if path:
            _TORCH_DIRS = (os.path.dirname(os.path.abspath(path)) + os.sep,)
    return _TORCH_DIRS


def _watch_leaf(tensor: Any, token: int) -> None:
    """Record each accumulation of torch's autograd into the leaf's ``.grad`` (once per leaf
    and session; the hook is removed when the session ends, see :func:`state.bind`)."""
    register = getattr(tensor, "register_post_accumulate_grad_hook", None)  # torch >= 2.1
    if register is None or token < 0:
        return
    watched = state.torch_watched.get(id(tensor))
    if watched is not None and watched() is tensor:
        return
    rec = state.rec
    session = weakref.ref(rec) if rec is not None else None

    def accumulated(leaf: Any) -> None:
        rec = state.rec
        if rec is None or session is None or session() is not rec:
            return
        try:
            grad = leaf.grad
            facts = {"tensor": token, "grad_tensor": _token(grad) if grad is not None else -1}
            rec.emit(
                BRIDGE,
                site=rec.sites.caller_outside(_torch_dirs()),
                detail=json.dumps({"framework": "torch", "direction": BRIDGE_ACCUMULATE, **facts}),
            )
        except Exception as exc:
            rec.fail(exc)

    try:
        handle = register(accumulated)
    except Exception:
        return
    state.torch_hooks.append(handle)
    state.torch_watched[id(tensor)] = weakref.ref(tensor)


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
            facts = None
            if framework == "torch":
                try:
                    facts = _torch_facts(args, kwargs, result)
                except Exception as exc:
                    rec.fail(exc)
            _emit(
                BRIDGE_IMPORT,
                framework,
                [(result, False), (grad if isinstance(grad, WARP_ARRAY) else None, True)],
                facts,
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
