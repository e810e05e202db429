"""``wp.Tape``: creation, scope, backward, zero/reset and record_func."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from warptrace.record import state
from warptrace.record.native import FRAMES
from warptrace.record.wrap.common import (
    TAPE_ATTR,
    WARP_ARRAY,
    array_state,
    call_site,
    getframe,
    mark,
    tape_id_of,
)
from warptrace.record.wrap.memory import record_zeroed
from warptrace.trace.schema import (
    BACKWARD_BEGIN,
    BACKWARD_END,
    EVENT_KIND_CODES,
    RECORD_FUNC,
    TAPE_CREATE,
    TAPE_ENTER,
    TAPE_EXIT,
    TAPE_RESET,
    TAPE_ZERO,
)

_TAPE_CREATE_CODE = EVENT_KIND_CODES[TAPE_CREATE]
_BACKWARD_BEGIN_CODE = EVENT_KIND_CODES[BACKWARD_BEGIN]
_BACKWARD_END_CODE = EVENT_KIND_CODES[BACKWARD_END]
_RECORD_FUNC_CODE = EVENT_KIND_CODES[RECORD_FUNC]


def _tape_event(kind: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """__enter__/__exit__: the Warp call, then the event."""
    code = EVENT_KIND_CODES[kind]
    starts_step = kind == TAPE_ENTER  # a step boundary of a recording schedule (record/gate.py)

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def after(self: Any, depth: int = 1) -> None:
            """The event of the Warp call that returned: the wrapper's second half. ``depth``:
            frames from here to the user's."""
            rec = state.tracker
            if rec is None:
                return
            try:
                ts = rec.local.state
            except AttributeError:
                ts = rec.thread_state()
            if ts.guard:
                return
            gate = rec.gate
            if gate is not None:
                if starts_step and not ts.phase:
                    gate.tape_event()  # (may start the next step: before its event)
                if state.rec is None:  # paused by the schedule
                    return
            try:
                tape_id = tape_id_of(rec, self)
                rec.row(ts.thread, code, tape_id, False, ts.phase, False, True, call_site(rec, depth + 1), -1, -1,
                        -1, None, None, (), -1)  # fmt: skip
            except Exception as exc:
                rec.fail(exc)

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(self, *args, **kwargs)
            after(self, 2)
            return result

        return mark(original, method)

    return make


make_tape_enter = _tape_event(TAPE_ENTER)
make_tape_exit = _tape_event(TAPE_EXIT)


def make_tape_init(original: Callable[..., Any]) -> Callable[..., Any]:
    """``Tape()``: a TAPE_CREATE event and the tape's id."""

    def after(self: Any, depth: int = 1) -> None:
        """The tape's id and event once Warp's __init__ returned (see _tape_event's after)."""
        rec = state.tracker
        if rec is None:
            return
        try:
            ts = rec.local.state
        except AttributeError:
            ts = rec.thread_state()
        try:  # under the guard too: a tape made inside a Warp call still gets its id
            gate = rec.gate
            if gate is not None and not ts.guard and not ts.phase:
                gate.tape_event()  # (may start the next step: before its event)
            with rec.lock:
                tape_id = rec.next_tape
                rec.next_tape = tape_id + 1
            setattr(self, TAPE_ATTR, (rec.tok, tape_id))
            if gate is not None:
                if state.rec is None:  # paused: its row is written when a recorded event first uses it
                    setattr(self, TAPE_ATTR, (gate.paused_tok, tape_id, call_site(rec, depth + 1)))
                    return
                gate.made_tape(self, tape_id)
            rec.row(ts.thread, _TAPE_CREATE_CODE, tape_id, False, ts.phase, False, True, call_site(rec, depth + 1),
                    -1, -1, -1, None, None, (), -1)  # fmt: skip
        except Exception as exc:
            rec.fail(exc)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        after(self, 2)

    return mark(original, __init__)


def make_tape_scoped(kind: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """zero()/reset(): the event first; the memsets it causes name it as parent."""

    code = EVENT_KIND_CODES[kind]
    starts_step = kind == TAPE_RESET  # a step boundary of a recording schedule (record/gate.py)

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        if kind == TAPE_ZERO:
            state.tape_zero_code = getattr(original, "__code__", None)

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            rec = state.tracker
            if rec is None:
                return original(self, *args, **kwargs)
            try:
                ts = rec.local.state
            except AttributeError:
                ts = rec.thread_state()
            if ts.guard:
                return original(self, *args, **kwargs)
            gate = rec.gate
            if gate is not None:
                if starts_step and not ts.phase:
                    gate.tape_event()  # (may start the next step: before its event)
                if state.rec is None:  # paused by the schedule
                    return original(self, *args, **kwargs)
            try:
                tape_id = tape_id_of(rec, self)
                site = call_site(rec)
                seq = rec.row(ts.thread, code, tape_id, False, ts.phase, False, True, site, ts.parent, -1, -1, None,
                              None, (), -1)  # fmt: skip
            except Exception as exc:
                rec.fail(exc)
                return original(self, *args, **kwargs)
            saved = ts.parent, ts.scope_tape, ts.scope_site, ts.zeroed
            zeroed: list[Any] = []
            ts.parent, ts.scope_tape, ts.scope_site, ts.zeroed = seq, tape_id, site, zeroed
            try:
                return original(self, *args, **kwargs)
            finally:
                ts.parent, ts.scope_tape, ts.scope_site, ts.zeroed = saved
                if zeroed:
                    try:
                        record_zeroed(rec, ts, zeroed, tape_id, site, seq)
                    except Exception as exc:
                        rec.fail(exc)

        return mark(original, method)

    return make


make_tape_zero = make_tape_scoped(TAPE_ZERO)
make_tape_reset = make_tape_scoped(TAPE_RESET)


def make_tape_backward(original: Callable[..., Any]) -> Callable[..., Any]:
    """``Tape.backward``: BACKWARD_BEGIN/END around it; events inside are in the backward phase."""

    def backward(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = state.tracker
        if rec is None:
            return original(self, *args, **kwargs)
        try:
            ts = rec.local.state
        except AttributeError:
            ts = rec.thread_state()
        if ts.guard:
            return original(self, *args, **kwargs)
        gate = rec.gate
        top = gate is not None and not ts.phase  # a step of a recording schedule ends with it
        if top:
            gate.tape_event()  # (a second backward with no tape event between starts a step)
        if state.rec is None:  # paused by the schedule
            try:
                return original(self, *args, **kwargs)
            finally:
                if top:
                    gate.backward_end()
        try:
            tape_id = tape_id_of(rec, self)
            site = call_site(rec)
            loss = args[0] if args else kwargs.get("loss")
            grads = args[1] if len(args) > 1 else kwargs.get("grads")
            loss_id = array_state(rec, loss)[1] if loss is not None else -1
            detail = None
            if grads:
                detail = json.dumps({"grads": [array_state(rec, a)[1] for a in grads]})
            rec.row(ts.thread, _BACKWARD_BEGIN_CODE, tape_id, False, 1, False, True, site, ts.parent, loss_id, -1,
                    None, detail, (), -1)  # fmt: skip
        except Exception as exc:
            rec.fail(exc)
            try:
                return original(self, *args, **kwargs)
            finally:
                if top:
                    gate.backward_end()
        saved = (ts.phase, ts.bw_tape, ts.bw_site, ts.bw_frame)
        ts.phase, ts.bw_tape, ts.bw_site, ts.bw_frame = 1, tape_id, site, getframe(0)
        try:
            return original(self, *args, **kwargs)
        finally:
            ts.phase, ts.bw_tape, ts.bw_site, ts.bw_frame = saved
            try:
                rec.row(ts.thread, _BACKWARD_END_CODE, tape_id, False, 1, False, True, site, ts.parent, loss_id, -1,
                        None, None, (), -1)  # fmt: skip
            except Exception as exc:
                rec.fail(exc)
            if top:
                gate.backward_end()

    state.backward_code = getattr(original, "__code__", None)
    return mark(original, backward)


def make_record_func(original: Callable[..., Any]) -> Callable[..., Any]:
    """``Tape.record_func``: a RECORD_FUNC event (a copy's adjoint names the copy as parent)."""

    def after(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any], depth: int = 2) -> None:
        """The event, once Warp's call returned. ``depth``: frames from here to the caller of
        ``record_func``."""
        rec = state.rec
        if rec is None:
            return
        try:
            ts = rec.local.state
        except AttributeError:
            ts = rec.thread_state()
        ctx = ts.copy_ctx
        site = None
        if ts.guard:  # only the entry a wp.copy in progress adds is recorded
            if ctx is None or ctx[0] != ts.guard:
                return
            ctx[4] = True  # the copy in progress is recorded on the tape
            parent = ctx[1]
            if getframe(depth * FRAMES).f_code is state.copy_code:
                site = ctx[5]  # recorded by the copy in progress: same user frame
        else:
            parent = ts.parent
        try:
            backward = args[0] if args else kwargs.get("backward")
            arrays = args[1] if len(args) > 1 else kwargs.get("arrays", ())
            name = getattr(backward, "__qualname__", type(backward).__name__)
            ids = [array_state(rec, a)[1] for a in arrays or () if isinstance(a, WARP_ARRAY)]
            tape_id = tape_id_of(rec, self)
            if site is None:
                site = call_site(rec, depth + 1)
            quoted = state.json_names.get(name) if name.__class__ is str else None
            if quoted is None:
                quoted = json.dumps(name)
                if name.__class__ is str:
                    state.json_names[name] = quoted
            # == json.dumps({"func": name, "arrays": ids}), without the encoder's per-call setup
            detail = '{"func": ' + quoted + ', "arrays": [' + ", ".join([str(i) for i in ids]) + "]}"
            rec.row(ts.thread, _RECORD_FUNC_CODE, tape_id, True, ts.phase, False, True, site, parent, -1, -1, None,
                    detail, (), -1)  # fmt: skip
        except Exception as exc:
            rec.fail(exc)

    def record_func(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        after(self, args, kwargs)
        return result

    return mark(original, record_func)


__all__ = [
    "make_record_func",
    "make_tape_backward",
    "make_tape_enter",
    "make_tape_exit",
    "make_tape_init",
    "make_tape_reset",
    "make_tape_zero",
]
