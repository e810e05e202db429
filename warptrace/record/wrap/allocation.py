"""Allocations and gradient attributes: fresh memory, views, grads, requires_grad/retain_grad."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from warptrace.record import state
from warptrace.record.identity import NEW, STATE
from warptrace.record.native import FRAMES
from warptrace.record.wrap.common import (
    ARRAY_INIT_CODE,
    array_state,
    current_tape,
    getframe,
    mark,
    positional_params,
)
from warptrace.trace.schema import SET_GRAD, SET_REQUIRES_GRAD

_INIT_NEW_PARAMS = ("self", "dtype", "shape", "strides", "device", "pinned")


def _registered(rec: Any, arr: Any) -> bool:
    """The array has its row in this session's trace (its attribute changes are events even
    while a recording schedule pauses the session)."""
    st = getattr(arr, STATE, None)
    return st is not None and st[0] is rec.tok


def _generic_then(original: Callable[..., Any], record: Callable[..., None]) -> Callable[..., Any]:
    """The wrapper for an original of another signature: call it, then ``record(self)``."""

    def generic(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        record(self, 2, False)  # ("generic" names no array-making API)
        return result

    return mark(original, generic)


def make_init_new(original: Callable[..., Any]) -> Callable[..., Any]:
    """``array._init_new``: the single path to fresh device memory.

    Warp calls it with its five parameters spelled out; so does the wrapper when the
    original has exactly those (forwarding ``*args, **kwargs`` costs ~0.1 µs more per
    allocation, and ``wp.zeros(n, requires_grad=True)`` makes two).
    """

    def record(self: Any, depth: int = 2, maker: bool = True) -> None:
        """``depth``: warptrace's frames above the allocation's caller (record and the wrapper);
        ``maker``: the wrapper has the name of an array-making API (``Sites.alloc_caller``)."""
        rec = state.tracker  # (also while a schedule pauses the session)
        if rec is None:
            return
        try:
            ts = rec.local.state
        except AttributeError:
            ts = rec.thread_state()
        try:  # under the guard too: every allocation is registered (a nested one has no site)
            owner = ts.grad_owner
            labelled = False
            if owner is not None:
                ts.grad_owner = None
                new = owner.__dict__.get(NEW)
                site = new[1] if new is not None and new[0] is rec.tok else -1
            elif ts.guard:
                site = -1
            else:
                site, labelled = rec.sites.alloc_caller(ARRAY_INIT_CODE, depth, maker)
            lock = rec.lock
            lock.acquire()
            try:
                rec.ident.on_new(self, site, owner, labelled)
            finally:
                lock.release()
        except Exception as exc:
            rec.fail(exc)

    if positional_params(original) == _INIT_NEW_PARAMS:

        def _init_new(self: Any, dtype: Any, shape: Any, strides: Any, device: Any, pinned: Any) -> Any:
            result = original(self, dtype, shape, strides, device, pinned)
            record(self)
            return result

        return mark(original, _init_new)

    return _generic_then(original, record)


_INIT_FROM_PTR_PARAMS = (
    "self",
    "ptr",
    "dtype",
    "shape",
    "strides",
    "capacity",
    "device",
    "pinned",
    "deleter",
)


def make_init_from_ptr(original: Callable[..., Any]) -> Callable[..., Any]:
    """``array._init_from_ptr``: views, aliases, zero-copy memory; resolved at first use.

    Warp's parameters spelled out when the original has exactly those (see
    :func:`make_init_new`); the generic form otherwise.
    """

    def record(self: Any, depth: int = 2, maker: bool = True) -> None:
        """``depth``, ``maker``: as in :func:`make_init_new`'s ``record``."""
        rec = state.tracker  # (also while a schedule pauses the session)
        if rec is None:
            return
        try:
            ts = rec.local.state
        except AttributeError:
            ts = rec.thread_state()
        try:  # under the guard too: a nested view is registered, without a site
            site, labelled = (
                (-1, False) if ts.guard else rec.sites.alloc_caller(ARRAY_INIT_CODE, depth, maker)
            )
            rec.ident.on_ptr(self, site, labelled)
        except Exception as exc:
            rec.fail(exc)

    if positional_params(original) == _INIT_FROM_PTR_PARAMS:

        def _init_from_ptr(
            self: Any, ptr: Any, dtype: Any, shape: Any, strides: Any, capacity: Any, device: Any, pinned: Any,
            deleter: Any,
        ) -> Any:  # fmt: skip
            result = original(self, ptr, dtype, shape, strides, capacity, device, pinned, deleter)
            record(self)
            return result

        return mark(original, _init_from_ptr)

    return _generic_then(original, record)


def make_alloc_grad(original: Callable[..., Any]) -> Callable[..., Any]:
    """``array._alloc_grad``: the next fresh allocation is this array's grad."""

    def after(rec: Any, ts: Any, self: Any, depth: int = 2) -> None:
        """Once Warp's call returned: an array registered before its grad existed
        (wp.array(data, requires_grad=True) copies its data, and so gets registered, before
        it sets _requires_grad) carries requires_grad=False in its arrays row: say that it
        has a grad from now on. (The requires_grad setter reports itself: skip when it is
        the caller.) ``depth``: frames from here to ``_alloc_grad``'s caller."""
        st = getattr(self, STATE, None)
        if (
            st is not None
            and st[0] is rec.tok
            and not ts.guard
            and getframe(depth * FRAMES).f_code.co_name != "requires_grad"  # not from the setter
        ):
            try:
                rec.emit(
                    SET_REQUIRES_GRAD,
                    tape=current_tape(rec, ts),
                    site=rec.sites.caller(depth),
                    array_id=st[1],
                    value=1.0,
                )
            except Exception as exc:
                rec.fail(exc)

    if positional_params(original) == ("self",):

        def _alloc_grad(self: Any) -> Any:
            rec = state.tracker  # (also while a schedule pauses the session)
            if rec is None:
                return original(self)
            try:
                ts = rec.local.state
            except AttributeError:
                ts = rec.thread_state()
            # under the guard too: the allocation that follows must know it is a grad
            saved = ts.grad_owner
            ts.grad_owner = self
            try:
                result = original(self)
            finally:
                ts.grad_owner = saved
            after(rec, ts, self)
            return result

        return mark(original, _alloc_grad)

    def _alloc_grad_generic(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = state.tracker  # (also while a schedule pauses the session)
        if rec is None:
            return original(self, *args, **kwargs)
        try:
            ts = rec.local.state
        except AttributeError:
            ts = rec.thread_state()
        saved = ts.grad_owner
        ts.grad_owner = self
        try:
            result = original(self, *args, **kwargs)
        finally:
            ts.grad_owner = saved
        after(rec, ts, self)
        return result

    return mark(original, _alloc_grad_generic)


def make_flag_setter(original: Callable[..., Any], kind: str) -> Callable[..., Any]:
    """``requires_grad`` / ``retain_grad`` setters."""

    def setter(self: Any, value: Any) -> None:
        rec = state.tracker  # (also while a schedule pauses the session)
        if rec is None:
            return original(self, value)
        try:
            ts = rec.local.state
        except AttributeError:
            ts = rec.thread_state()
        if ts.guard or (state.rec is None and not _registered(rec, self)):
            return original(self, value)  # (paused: a row written later has the value)
        try:
            array_id = array_state(rec, self)[1]
        except Exception as exc:
            rec.fail(exc)
            return original(self, value)
        original(self, value)
        try:
            rec.emit(
                kind,
                tape=current_tape(rec, ts),
                site=rec.sites.caller(),
                array_id=array_id,
                value=1.0 if value else 0.0,
            )
        except Exception as exc:
            rec.fail(exc)
        return None

    return mark(original, setter)


def make_grad_setter(original: Callable[..., Any]) -> Callable[..., Any]:
    """``array.grad = g``: a SET_GRAD event, or a link when Warp builds the array with its grad."""

    def setter(self: Any, grad: Any) -> None:
        rec = state.tracker  # (also while a schedule pauses the session)
        if rec is None:
            return original(self, grad)
        try:
            ts = rec.local.state
        except AttributeError:
            ts = rec.thread_state()
        if ts.guard:
            return original(self, grad)
        if getframe(FRAMES).f_code is ARRAY_INIT_CODE:
            # wp.array(..., grad=g) and the grad views Warp builds for slices: a link, not a change
            original(self, grad)
            try:
                with rec.lock:
                    rec.ident.link_grad(self, grad)
            except Exception as exc:
                rec.fail(exc)
            return None
        if state.rec is None and not _registered(rec, self):
            return original(self, grad)  # (paused: the owner's row, written later, links its grad)
        try:
            owner_st = array_state(rec, self)
        except Exception as exc:
            rec.fail(exc)
            return original(self, grad)
        original(self, grad)
        try:
            ref_id = -1
            if grad is not None:
                with rec.lock:
                    ref_id = rec.ident.mark_grad(grad, owner_st)[1]
            rec.emit(
                SET_GRAD,
                tape=current_tape(rec, ts),
                site=rec.sites.caller(),
                array_id=owner_st[1],
                ref_id=ref_id,
            )
        except Exception as exc:
            rec.fail(exc)
        return None

    return mark(original, setter)


def wrap_property(
    prop: property, make_setter: Callable[[Callable[..., Any]], Callable[..., Any]]
) -> property:
    """The property with its setter wrapped (getter and deleter are the originals)."""
    setter = make_setter(prop.fset) if prop.fset is not None else None
    return property(prop.fget, setter, prop.fdel, prop.__doc__)


__all__ = [
    "make_alloc_grad",
    "make_flag_setter",
    "make_grad_setter",
    "make_init_from_ptr",
    "make_init_new",
    "wrap_property",
]
