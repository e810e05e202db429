"""Live ``wp.Mesh``, ``wp.Bvh`` and ``wp.Volume`` objects, found again from the ids kernels get.

A kernel argument ``mesh: wp.uint64`` holds ``mesh.id``; the arrays behind it (the mesh's
points, indices and velocities, a BVH's lowers and uppers, a volume's buffer) are what the
kernel really reads. The constructors are wrapped so that every handle object made while
tracing is known (weakly: tracing keeps nothing alive); :func:`resolve` turns an id back
into its object and :func:`handle_array` into one of its arrays. ``Mesh.refit`` and
``Bvh.refit`` are recorded as native events that read the points (bounds): the tree they
rebuild is native memory no kernel argument names.

Handles made before tracing started are not known; their ids resolve to nothing and the
launch records no access for them (as before this module existed).
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable
from typing import Any

from warptrace.record import state
from warptrace.record.kernel_handles import BVH, MESH, VOLUME
from warptrace.record.wrap.common import access_row, current_tape, guarded_call, mark
from warptrace.trace.schema import FLAG_NO_GRAD, NATIVE, ROLE_READ

# every handle object made while tracing (of any session: they outlive sessions)
_LIVE: weakref.WeakSet[Any] = weakref.WeakSet()
_BY_ID: dict[int, weakref.ref[Any]] = {}
# a volume's buffer as a wp.array (Volume.array() makes a new object each call)
_VOLUME_BUFFERS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_KIND_CLASS_NAMES = {MESH: "Mesh", BVH: "Bvh", VOLUME: "Volume"}


def resolve(kind: str, handle_id: Any) -> Any:
    """The live handle object of ``kind`` whose id is ``handle_id``, or None."""
    try:
        value = int(handle_id)
    except (TypeError, ValueError):
        return None
    if not value:
        return None
    ref = _BY_ID.get(value)
    obj = ref() if ref is not None else None
    if obj is None or getattr(obj, "id", None) != value:
        obj = None
        for candidate in list(_LIVE):  # an id seen for the first time (volumes get theirs late)
            if getattr(candidate, "id", None) == value:
                obj = candidate
                _BY_ID[value] = weakref.ref(candidate)
                break
    if obj is None or type(obj).__name__ != _KIND_CLASS_NAMES[kind]:
        return None
    return obj


def handle_array(kind: str, obj: Any, field: str) -> Any:
    """The wp.array ``field`` of a handle object ("points", "lowers", "buffer", ...), or None."""
    if kind != VOLUME:
        return getattr(obj, field, None)
    buffer = _VOLUME_BUFFERS.get(obj)
    if buffer is None:
        try:
            buffer = obj.array()  # (called under the recorder's guard: a view, not recorded)
        except Exception:
            return None
        _VOLUME_BUFFERS[obj] = buffer
    return buffer


def make_handle_init(original: Callable[..., Any]) -> Callable[..., Any]:
    """``Mesh.__init__`` / ``Bvh.__init__`` / ``Volume.__init__``: the object is known from now on."""

    def init(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        if state.rec is not None:
            try:
                _LIVE.add(self)
                value = getattr(self, "id", None)
                if value:
                    _BY_ID[int(value)] = weakref.ref(self)
            except Exception as exc:
                state.rec.fail(exc)
        return result

    return mark(original, init)


def make_refit(original: Callable[..., Any], kind: str) -> Callable[..., Any]:
    """``Mesh.refit`` / ``Bvh.refit``: a native event reading the arrays the tree is rebuilt from."""
    fields = ("points",) if kind == MESH else ("lowers", "uppers")
    detail = json.dumps({"func": f"{_KIND_CLASS_NAMES[kind]}.refit"})

    def refit(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = state.rec
        if rec is None:
            return original(self, *args, **kwargs)
        try:
            ts = rec.local.state
        except AttributeError:
            ts = rec.thread_state()
        if ts.guard:
            return original(self, *args, **kwargs)
        result = guarded_call(ts, original, self, *args, **kwargs)
        try:
            accesses = []
            for field in fields:
                array = getattr(self, field, None)
                if array is not None:
                    accesses.append(access_row(rec, array, ROLE_READ, FLAG_NO_GRAD, field))
            rec.emit(NATIVE, tape=current_tape(rec, ts), site=rec.sites.caller(), detail=detail,
                     accesses=tuple(accesses))  # fmt: skip
        except Exception as exc:
            rec.fail(exc)
        return result

    return mark(original, refit)


__all__ = ["handle_array", "make_handle_init", "make_refit", "resolve"]
