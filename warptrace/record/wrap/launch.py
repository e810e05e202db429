"""``wp.launch`` and ``Launch.launch``: the hot path, one call per kernel launch.

``Tape.record_launch`` is deliberately not wrapped: Warp stores the caller of its
``launch`` (our wrapper) as the tape entry's ``metadata["caller"]``, and the launch
wrapper puts the user's call site there after Warp appended the entry, which saves a
Python frame on every taped launch. Whether Warp taped a launch is read from
``len(tape.launches)`` before and after.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Sequence
from typing import Any

import warp._src.context as _context

from warptrace.record import handles, state
from warptrace.record.identity import STATE
from warptrace.record.native import FRAMES
from warptrace.record.session import Recorder, ThreadState
from warptrace.record.wrap.common import (
    CMD_ARGS_ATTR,
    EMPTY,
    TAPE_ATTR,
    call_site,
    capture_of,
    current_tape,
    getframe,
    mark,
    positional_params,
    tape_id_of,
)
from warptrace.record.wrap.plans import LaunchPlan, dim_code_of, plan_for
from warptrace.trace.schema import CMD_LAUNCH, EVENT_KIND_CODES, LAUNCH, ROLE_NONE

_LAUNCH = EVENT_KIND_CODES[LAUNCH]
perf_ns = time.perf_counter_ns


def _launch_device(device: Any, stream: Any) -> Any:
    return stream.device if stream is not None else device


def _append_launch_accesses(
    rec: Recorder,
    acc: list[Any],
    seq: int,
    plan: LaunchPlan,
    fwd_a: Sequence[Any],
    fwd_b: Sequence[Any],
    adjoint: bool,
    adj_a: Sequence[Any],
    adj_b: Sequence[Any],
) -> None:
    """Access rows of one launch; args are ``fwd_a + fwd_b`` (Warp concatenates inputs and outputs)."""
    tok = rec.tok
    register = rec.ident.register
    n_a = len(fwd_a)
    if not adjoint:
        for index, arg, field_path, path, role, flags in plan.fwd:
            value = fwd_a[index] if index < n_a else fwd_b[index - n_a]
            if path is not None:
                for name in path:
                    if value is None:
                        break
                    value = getattr(value, name, None)
            if value is None:
                continue
            st = getattr(value, STATE, None)
            if st is None or st[0] is not tok:
                st = register(value)
            acc.extend((seq, st[1], st[2], role, flags | st[3], arg, field_path))
        return
    n_adj_a = len(adj_a)
    n_adj = n_adj_a + len(adj_b)
    for index, arg, field_path, path, frole, fflags, grole, gflags, rrole, rflags in plan.adj:
        value = fwd_a[index] if index < n_a else fwd_b[index - n_a]
        grad = None
        if index < n_adj:
            grad = adj_a[index] if index < n_adj_a else adj_b[index - n_adj_a]
        if path is not None:
            for name in path:
                if value is not None:
                    value = getattr(value, name, None)
                if grad is not None:
                    grad = getattr(grad, name, None)
        if value is not None:
            st = getattr(value, STATE, None)
            if st is None or st[0] is not tok:
                st = register(value)
            acc.extend((seq, st[1], st[2], frole, fflags | st[3], arg, field_path))
        if grad is not None:
            st = getattr(grad, STATE, None)
            if st is None or st[0] is not tok:
                st = register(grad)
            if value is not None and getattr(value, "_retain_grad", False):
                acc.extend((seq, st[1], st[2], rrole, rflags, arg, field_path))
            else:
                acc.extend((seq, st[1], st[2], grole, gflags, arg, field_path))


def _handle_arrays(ts: ThreadState, plan: LaunchPlan, fwd_a: Sequence[Any], fwd_b: Sequence[Any]
                   ) -> list[tuple[tuple[Any, ...], Any]]:  # fmt: skip
    """(plan row, array) of each array behind a handle argument of the launch, resolved from the
    id it was given (outside the recorder's lock: a volume's buffer is a new wp.array view)."""
    n_a = len(fwd_a)
    out = []
    ts.guard += 1
    try:
        for row in plan.handles:
            index, kind, field = row[0], row[2], row[3]
            value = fwd_a[index] if index < n_a else fwd_b[index - n_a]
            obj = handles.resolve(kind, value)
            if obj is None:
                continue
            array = handles.handle_array(kind, obj, field)
            if array is not None:
                out.append((row, array))
    finally:
        ts.guard -= 1
    return out


def _append_handle_accesses(
    rec: Recorder, acc: list[Any], seq: int, behind: list[tuple[tuple[Any, ...], Any]], adjoint: bool
) -> None:
    """Access rows of the arrays behind handle arguments (see ``LaunchPlan.handles``)."""
    tok = rec.tok
    register = rec.ident.register
    for row, value in behind:
        name = row[1]
        st = getattr(value, STATE, None)
        if st is None or st[0] is not tok:
            st = register(value)
        if not adjoint:
            acc.extend((seq, st[1], st[2], row[4], row[5] | st[3], name, 0))
            continue
        frole, fflags, grole, gflags, rrole, rflags = row[6:]
        acc.extend((seq, st[1], st[2], frole, fflags | st[3], name, 0))
        grad = getattr(value, "grad", None)
        if grad is None:
            continue
        retained = getattr(value, "_retain_grad", False)
        role, flags = (rrole, rflags) if retained else (grole, gflags)
        if role == ROLE_NONE:
            continue
        gst = getattr(grad, STATE, None)
        if gst is None or gst[0] is not tok:
            gst = register(grad)
        acc.extend((seq, gst[1], gst[2], role, flags, name, 0))


# ---------------------------------------------------------------------------- launch
# wp.launch's parameters, identical from Warp 1.13 to 1.19. The wrapper spells them out
# because forwarding *args/**kwargs costs ~0.35 µs a call; another signature gets the
# generic wrapper.
_LAUNCH_PARAMS = (
    "kernel", "dim", "inputs", "outputs", "adj_inputs", "adj_outputs", "device", "stream",
    "adjoint", "record_tape", "record_cmd", "max_blocks", "block_dim",
)  # fmt: skip


def _record_launch(
    rec: Recorder,
    ts: ThreadState,
    site: int,
    tape: Any,
    taped_before: int,
    kernel: Any,
    dim: Any,
    inputs: Sequence[Any],
    outputs: Sequence[Any],
    adj_inputs: Sequence[Any],
    adj_outputs: Sequence[Any],
    device: Any,
    stream: Any,
    adjoint: bool,
    record_cmd: bool,
    result: Any,
) -> None:
    """The LAUNCH event of a wp.launch that returned (all appended under one lock)."""
    if record_cmd and result is not None:
        # a Launch object, executed later by Launch.launch(): keep its arguments
        if getattr(result, "fwd_args", None) is None:
            setattr(result, CMD_ARGS_ATTR, ([*inputs, *outputs], [*adj_inputs, *adj_outputs]))
        return
    plan = state.plans.get(kernel)
    if plan is None:
        plan = plan_for(rec, kernel, [*inputs, *outputs])
    behind = _handle_arrays(ts, plan, inputs, outputs) if plan.handles else ()
    dim_code = state.dims.get(dim) if dim.__class__ is int or dim.__class__ is tuple else None
    if dim_code is None:
        dim_code = dim_code_of(rec, dim)
    graph = capture_of(rec, _launch_device(device, stream)) if rec.captures else -1
    phase = ts.phase
    if phase:
        tape_id = ts.bw_tape
    elif tape is not None:
        tagged = getattr(tape, TAPE_ATTR, None)
        tape_id = tagged[1] if tagged is not None and tagged[0] is rec.tok else tape_id_of(rec, tape)
    else:
        tape_id = -1
    recorded = tape is not None and len(tape.launches) > taped_before
    if recorded and site >= 0:
        metadata = tape.launches[-1][-1]  # Warp took "caller" from our frame: put the user back
        if metadata.__class__ is dict:
            metadata["caller"] = rec.sites.caller_dicts[site]
    t_ns = perf_ns()
    adjoint = bool(adjoint)
    lock = rec.lock
    lock.acquire()
    try:
        seq = rec.seq
        rec.seq = seq + 1
        ev = rec.ev
        ev.extend(
            (seq, _LAUNCH, tape_id, recorded, phase, adjoint, graph < 0 or graph in rec.executing_captures,
             site, plan.kernel_id, ts.thread, t_ns, ts.parent, -1, graph, dim_code)
        )  # fmt: skip
        acc = rec.acc
        _append_launch_accesses(rec, acc, seq, plan, inputs, outputs, adjoint, adj_inputs, adj_outputs)
        if behind:
            _append_handle_accesses(rec, acc, seq, behind, adjoint)
        if len(ev) >= rec.flush_ev_len or len(acc) >= rec.flush_acc_len or t_ns >= rec.flush_deadline:
            rec.flush()
    finally:
        lock.release()


def make_launch(original: Callable[..., Any]) -> Callable[..., Any]:
    """``wp.launch`` (both bindings): forward, adjoint, launch_tiled, optimizers, captured.

    The hot path: one call per kernel launch. The tape's length before and after
    tells whether Warp recorded the launch on it.
    """
    defaults = original.__defaults__ or ()
    if (
        positional_params(original, with_defaults=True) != _LAUNCH_PARAMS
        or len(defaults) != len(_LAUNCH_PARAMS) - 2
    ):
        return _make_launch_generic(original)
    plans = state.plans
    dims = state.dims
    kernel_class = _context.Kernel
    # Warp's own default objects (the tape stores them), as the wrapper's defaults (a compiled
    # function takes its defaults from its definition, not from __defaults__)
    (d_inputs, d_outputs, d_adj_inputs, d_adj_outputs, d_device, d_stream, d_adjoint, d_record_tape,
     d_record_cmd, d_max_blocks, d_block_dim) = defaults  # fmt: skip

    def launch(
        kernel, dim, inputs=d_inputs, outputs=d_outputs, adj_inputs=d_adj_inputs, adj_outputs=d_adj_outputs,
        device=d_device, stream=d_stream, adjoint=d_adjoint, record_tape=d_record_tape, record_cmd=d_record_cmd,
        max_blocks=d_max_blocks, block_dim=d_block_dim,
    ):  # fmt: skip
        rec = state.rec
        if rec is None:
            return original(kernel, dim, inputs, outputs, adj_inputs, adj_outputs, device, stream,
                            adjoint, record_tape, record_cmd, max_blocks, block_dim)  # fmt: skip
        try:
            ts = rec.local.state
        except AttributeError:
            ts = rec.thread_state()
        if ts.guard:
            return original(kernel, dim, inputs, outputs, adj_inputs, adj_outputs, device, stream,
                            adjoint, record_tape, record_cmd, max_blocks, block_dim)  # fmt: skip
        try:
            # Sites.by_pos holds user positions only: a hit means the caller is the user's line.
            frame = getframe(FRAMES)
            site = rec.sites.by_pos.get((id(frame.f_code), frame.f_lasti))
            if site is None:
                if ts.phase and frame.f_code is state.backward_code and frame.f_back is ts.bw_frame:
                    site = ts.bw_site  # an adjoint launch of Tape.backward: its caller's line, no walk
                else:
                    site = rec.sites.caller()
            runtime = _context.runtime
            tape = runtime.tape if runtime is not None else None
            taped_before = len(tape.launches) if tape is not None else -1
        except Exception as exc:
            rec.fail(exc)
            site, tape, taped_before = -1, None, -1
        result = original(kernel, dim, inputs, outputs, adj_inputs, adj_outputs, device, stream,
                          adjoint, record_tape, record_cmd, max_blocks, block_dim)  # fmt: skip
        if record_cmd or rec.captures or kernel.__class__ is not kernel_class:
            try:
                _record_launch(rec, ts, site, tape, taped_before, kernel, dim, inputs, outputs, adj_inputs,
                               adj_outputs, device, stream, adjoint, record_cmd, result)  # fmt: skip
            except Exception as exc:
                rec.fail(exc)
            return result
        # The common case, inlined: a launch of a known kernel, not captured (same rows as _record_launch).
        try:
            plan = plans.get(kernel)
            if plan is None:
                plan = plan_for(rec, kernel, [*inputs, *outputs])
            if plan.handles:  # arrays behind mesh/BVH/volume ids: the general path resolves them
                _record_launch(rec, ts, site, tape, taped_before, kernel, dim, inputs, outputs, adj_inputs,
                               adj_outputs, device, stream, adjoint, record_cmd, result)  # fmt: skip
                return result
            dim_code = dims.get(dim) if dim.__class__ is int or dim.__class__ is tuple else None
            if dim_code is None:
                dim_code = dim_code_of(rec, dim)
            phase = ts.phase
            if tape is not None:
                if phase:
                    tape_id = ts.bw_tape
                else:
                    tagged = getattr(tape, TAPE_ATTR, None)
                    tape_id = (
                        tagged[1] if tagged is not None and tagged[0] is rec.tok else tape_id_of(rec, tape)
                    )
                launches = tape.launches
                recorded = len(launches) > taped_before
                if recorded:
                    metadata = launches[-1][-1]
                    if metadata.__class__ is dict and site >= 0:
                        metadata["caller"] = rec.sites.caller_dicts[site]
            else:
                tape_id = ts.bw_tape if phase else -1
                recorded = False
            t_ns = perf_ns()
            lock = rec.lock
            lock.acquire()
            try:
                seq = rec.seq
                rec.seq = seq + 1
                ev = rec.ev
                acc = rec.acc
                if adjoint:
                    ev.extend(
                        (seq, _LAUNCH, tape_id, recorded, phase, True, True, site, plan.kernel_id,
                         ts.thread, t_ns, ts.parent, -1, -1, dim_code)
                    )  # fmt: skip
                    _append_launch_accesses(
                        rec, acc, seq, plan, inputs, outputs, True, adj_inputs, adj_outputs
                    )
                    if (
                        len(ev) >= rec.flush_ev_len
                        or len(acc) >= rec.flush_acc_len
                        or t_ns >= rec.flush_deadline
                    ):
                        rec.flush()
                    return result
                ev.extend(
                    (seq, _LAUNCH, tape_id, recorded, phase, False, True, site, plan.kernel_id,
                     ts.thread, t_ns, ts.parent, -1, -1, dim_code)
                )  # fmt: skip
                tok = rec.tok
                args = (*inputs, *outputs)
                for index, arg, role, flags in plan.simple:
                    value = args[index]
                    st = getattr(value, STATE, None)
                    if st is None or st[0] is not tok:
                        if value is None:
                            continue
                        st = rec.ident.register(value)
                    acc.extend((seq, st[1], st[2], role, flags | st[3], arg, 0))
                for index, arg, field_path, path, role, flags in plan.fields:
                    value = args[index]
                    for name in path:
                        value = getattr(value, name, None)
                    if value is None:
                        continue
                    st = getattr(value, STATE, None)
                    if st is None or st[0] is not tok:
                        st = rec.ident.register(value)
                    acc.extend((seq, st[1], st[2], role, flags | st[3], arg, field_path))
                if len(ev) >= rec.flush_ev_len or len(acc) >= rec.flush_acc_len or t_ns >= rec.flush_deadline:
                    rec.flush()
            finally:
                lock.release()
        except Exception as exc:
            rec.fail(exc)
        return result

    return mark(original, launch)


def _make_launch_generic(original: Callable[..., Any]) -> Callable[..., Any]:
    """A launch with an unknown signature: bind arguments by name (slower, same events)."""
    signature = inspect.signature(original)

    def launch(*args: Any, **kwargs: Any) -> Any:
        rec = state.rec
        if rec is None:
            return original(*args, **kwargs)
        try:
            ts = rec.local.state
        except AttributeError:
            ts = rec.thread_state()
        if ts.guard:
            return original(*args, **kwargs)
        try:
            site = rec.sites.caller()
            runtime = _context.runtime
            tape = runtime.tape if runtime is not None else None
            taped_before = len(tape.launches) if tape is not None else -1
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            named = bound.arguments
        except Exception as exc:
            rec.fail(exc)
            return original(*args, **kwargs)
        result = original(*args, **kwargs)
        try:
            _record_launch(
                rec, ts, site, tape, taped_before, named["kernel"], named.get("dim"),
                named.get("inputs") or EMPTY, named.get("outputs") or EMPTY,
                named.get("adj_inputs") or EMPTY, named.get("adj_outputs") or EMPTY,
                named.get("device"), named.get("stream"), named.get("adjoint", False),
                named.get("record_cmd", False), result,
            )  # fmt: skip
        except Exception as exc:
            rec.fail(exc)
        return result

    return mark(original, launch)


def make_launch_replay(original: Callable[..., Any]) -> Callable[..., Any]:
    """``Launch.launch()``: a record_cmd launch executed (never taped)."""

    def launch(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = state.rec
        if rec is None:
            return original(self, *args, **kwargs)
        try:
            ts = rec.local.state
        except AttributeError:
            ts = rec.thread_state()
        if ts.guard:
            return original(self, *args, **kwargs)
        result = original(self, *args, **kwargs)
        try:
            site = call_site(rec)
            kernel = self.kernel
            fwd_args = getattr(self, "fwd_args", None)
            adj_args = getattr(self, "adj_args", None)
            detail = None
            if fwd_args is None:
                stashed = getattr(self, CMD_ARGS_ATTR, None)
                if stashed is not None:
                    fwd_args, adj_args = stashed
                    detail = '{"args": "as recorded; set_param changes are not seen"}'
            adjoint = bool(getattr(self, "adjoint", False))
            graph = capture_of(rec, self.device) if rec.captures else -1
            executed = graph < 0 or graph in rec.executing_captures
            if fwd_args is None:
                rec.emit(CMD_LAUNCH, tape=current_tape(rec, ts), site=site, adjoint=adjoint,
                         executed=executed, ref_id=graph, detail='{"args": "unknown"}')  # fmt: skip
                return result
            with rec.lock:
                plan = plan_for(rec, kernel, fwd_args)
                seq = rec.emit(
                    CMD_LAUNCH,
                    tape=current_tape(rec, ts),
                    site=site,
                    kernel=plan.kernel_id,
                    adjoint=adjoint,
                    executed=executed,
                    ref_id=graph,
                    detail=detail,
                )
                _append_launch_accesses(
                    rec, rec.acc, seq, plan, fwd_args, EMPTY, adjoint, adj_args or EMPTY, EMPTY
                )
        except Exception as exc:
            rec.fail(exc)
        return result

    return mark(original, launch)


__all__ = ["make_launch", "make_launch_replay"]
