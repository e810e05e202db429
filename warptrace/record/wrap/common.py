"""Helpers every wrapper module shares: marking a wrapper, tape and graph ids, array state."""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
from collections.abc import Callable
from types import CodeType, FunctionType
from typing import Any

import warp
import warp._src.context as _context

from warptrace.record.identity import STATE
from warptrace.record.native import FRAMES
from warptrace.record.session import Recorder, ThreadState
from warptrace.trace.schema import TAPE_CREATE

TAPE_ATTR = "_warptrace_tape"  # (token, tape_id) on Tape objects
GRAPH_ATTR = "_warptrace_graph"  # (token, graph_id) on Graph objects
CMD_ARGS_ATTR = "_warptrace_args"  # (fwd_args, adj_args) on Launch objects (Warp < 1.19 keeps none)
ORIGINAL_ATTR = "__warptrace_original__"  # on every wrapper: the object it replaced

EMPTY: tuple[Any, ...] = ()
WARP_ARRAY = warp.array
ARRAY_INIT_CODE = warp.array.__init__.__code__
WARP_VERSION = tuple(int(part) for part in warp.config.version.split(".")[:2] if part.isdigit())
getframe = sys._getframe  # (called as getframe(n * FRAMES): see record/native.py)


def mark(original: Callable[..., Any], wrapper: Callable[..., Any]) -> Callable[..., Any]:
    """``wrapper`` made to stand in for ``original``: Warp's stack walks skip it like
    the original's own frame (:func:`in_place_of`), it carries the original's metadata
    (name, doc, ``__wrapped__``, so ``inspect.signature`` sees the original's) and
    ``__warptrace_original__``."""
    wrapper = in_place_of(original, wrapper)
    functools.update_wrapper(wrapper, original)
    setattr(wrapper, ORIGINAL_ATTR, original)
    return wrapper


_globals_for: dict[tuple[int, str], dict[str, Any]] = {}


def in_place_of(original: Callable[..., Any], wrapper: Callable[..., Any]) -> Callable[..., Any]:
    """The same wrapper function, whose frames look like frames of ``original``'s package.

    Warp finds "the user's line" by walking the stack past its own frames: by file
    (``_copy_caller_location``, behind the overwrite warning of ``wp.copy``: frames
    under ``warp/_src/``) or by package (``_capture_alloc_tag``: ``__package__`` of the
    frame's globals). A wrapper frame would stop both walks at warptrace. So the
    wrapper's code gets a file name that starts with the original's folder and
    resolves to the wrapper's real file (``.../warp/_src/../../.../wrap/memory.py``:
    tracebacks and ``linecache`` still show warptrace's source), and its globals are
    a copy of its module's with the original's ``__package__``. Same bytecode, same
    closure: no cost per call. Kept as is when the original is not a Python function,
    and when the wrapper is compiled (``record/native.py``): it has no frame to hide.
    """
    code = getattr(original, "__code__", None)
    globals_ = getattr(original, "__globals__", None)
    if not isinstance(code, CodeType) or not isinstance(wrapper, FunctionType) or globals_ is None:
        return wrapper
    folder = os.path.dirname(code.co_filename)
    try:
        filename = os.path.join(folder, os.path.relpath(wrapper.__code__.co_filename, folder))
    except ValueError:  # another drive
        return wrapper
    package = globals_.get("__package__")
    key = (id(wrapper.__globals__), str(package))
    frame_globals = _globals_for.get(key)
    if frame_globals is None:
        # The wrapper modules bind their globals once at import; the copy is taken after.
        frame_globals = dict(wrapper.__globals__)
        frame_globals["__package__"] = package
        _globals_for[key] = frame_globals
    stand_in = FunctionType(
        wrapper.__code__.replace(co_filename=filename),
        frame_globals,
        wrapper.__name__,
        wrapper.__defaults__,
        wrapper.__closure__,
    )
    stand_in.__kwdefaults__ = wrapper.__kwdefaults__
    return stand_in


def positional_params(function: Callable[..., Any], with_defaults: bool = False) -> tuple[str, ...] | None:
    """Parameter names of ``function`` when all are plain positional-or-keyword ones without a
    default (``with_defaults``: defaults allowed; the caller checks or copies them), else None.

    A wrapper that spells out its original's parameters forwards a call ~0.1 µs faster
    than one that forwards ``*args, **kwargs``; the wrappers that do so check the
    original's signature with this first and fall back to the generic form (a default the
    wrapper does not repeat would make a call that omits the argument fail).
    """
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is not p.POSITIONAL_OR_KEYWORD for p in params):
        return None
    if not with_defaults and any(p.default is not p.empty for p in params):
        return None
    return tuple(p.name for p in params)


def call_site(rec: Recorder, depth: int = 2) -> int:
    """Call site of the wrapper that calls this: its caller's position if that is a known
    user position (one dict hit), else the frame walk of ``Sites.caller``. ``depth``: frames
    from here to the user's as Python source has them (3 for a helper the wrapper calls)."""
    frame = getframe(depth * FRAMES)
    hit = rec.sites.by_pos.get((id(frame.f_code), frame.f_lasti))
    return hit if hit is not None else rec.sites.caller(depth)


def guarded_call(ts: ThreadState, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """The original call with the guard up: what Warp does inside is not recorded."""
    ts.guard += 1
    try:
        return original(*args, **kwargs)
    finally:
        ts.guard -= 1


def tape_id_of(rec: Recorder, tape: Any) -> int:
    """Monotonic tape id (``id()`` is reused); tapes made before start() get one on first sight."""
    if tape is None:
        return -1
    tagged = getattr(tape, TAPE_ATTR, None)
    if tagged is not None and tagged[0] is rec.tok:
        return int(tagged[1])
    gate = rec.gate
    if tagged is not None and gate is not None and tagged[0] is gate.paused_tok:
        # made while a recording schedule paused the session: its creation row now, at first use
        setattr(tape, TAPE_ATTR, (rec.tok, tagged[1]))
        rec.emit(TAPE_CREATE, tape=tagged[1], site=tagged[2], parent=-1)
        return int(tagged[1])
    new_id = rec.new_id("next_tape")
    with contextlib.suppress(Exception):
        setattr(tape, TAPE_ATTR, (rec.tok, new_id))
    rec.emit(TAPE_CREATE, tape=new_id, detail='{"preexisting": true}', parent=-1)
    return new_id


def current_tape(rec: Recorder, ts: ThreadState) -> int:
    """The tape an event belongs to: the one being backpropagated/zeroed, else the active one."""
    if ts.phase:
        return ts.bw_tape
    if ts.scope_tape >= 0:
        return ts.scope_tape
    runtime = _context.runtime
    tape = runtime.tape if runtime is not None else None
    return tape_id_of(rec, tape) if tape is not None else -1


def array_state(rec: Recorder, arr: Any) -> tuple[Any, ...]:
    """The array's identity state tuple (``identity.STATE``), registering it on first sight."""
    st = getattr(arr, STATE, None)
    if st is not None and st[0] is rec.tok:
        return st
    with rec.lock:
        return rec.ident.register(arr)


def access_row(
    rec: Recorder, arr: Any, role: int, flags: int, arg: str = "", field: str = ""
) -> tuple[int, ...]:
    """An access row for :meth:`Recorder.emit` (``arg``/``field`` coded)."""
    st = array_state(rec, arr)
    return (st[1], st[2], role, flags | st[3], rec.name_code(arg), rec.name_code(field) if field else 0)


def device_alias(device: Any) -> str:
    try:
        return str(_context.runtime.get_device(device).alias)  # type: ignore[attr-defined]
    except Exception:
        return str(device)


def capture_of(rec: Recorder, device: Any) -> int:
    """Graph id when ``device`` is being captured (events there are not executed), else -1."""
    if not rec.captures:
        return -1
    return rec.captures.get(device_alias(device), -1)


__all__ = ["CMD_ARGS_ATTR", "GRAPH_ATTR", "ORIGINAL_ATTR", "TAPE_ATTR", "mark"]
