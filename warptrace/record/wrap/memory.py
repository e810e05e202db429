"""Memory operations that are not launches: copies, memsets, native utilities, value reads."""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from warptrace.record import state
from warptrace.record.identity import NEW, STATE
from warptrace.record.native import FRAMES
from warptrace.record.session import Recorder, ThreadState
from warptrace.record.wrap.common import (
    EMPTY,
    WARP_ARRAY,
    access_row,
    array_state,
    capture_of,
    current_tape,
    getframe,
    guarded_call,
    in_place_of,
    mark,
    positional_params,
)
from warptrace.record.wrap.hostdata import deferred_detail
from warptrace.trace.schema import (
    COPY,
    EVENT_KIND_CODES,
    FLAG_STORE,
    FLAG_UNCERTAIN,
    MEMSET,
    NATIVE,
    ROLE_READ,
    ROLE_READWRITE,
    ROLE_WRITE,
    VALUE_READ,
)

_COPY = EVENT_KIND_CODES[COPY]
_MEMSET = EVENT_KIND_CODES[MEMSET]
_VALUE_READ = EVENT_KIND_CODES[VALUE_READ]
perf_ns = time.perf_counter_ns
_NO_KWARGS: dict[str, Any] = {}  # never written to


_COPY_PARAMS = ("dest", "src", "dest_offset", "src_offset", "count", "stream")


def make_copy(original: Callable[..., Any]) -> Callable[..., Any]:
    """``wp.copy`` (and ``clone``/``assign``/``wp.array(data)``, which call it).

    Warp's ``copy(dest, src, dest_offset=0, src_offset=0, count=0, stream=None)`` gets a
    wrapper with those parameters (no ``*args, **kwargs`` to pack and pick apart); another
    signature gets the generic form. Both hand the call to ``record``.
    """
    copy_code = getattr(original, "__code__", None)
    state.copy_code = copy_code

    def record(
        rec: Recorder,
        ts: ThreadState,
        dest: Any,
        src: Any,
        dest_offset: Any,
        src_offset: Any,
        count: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        parent = -1
        site = None
        if ts.guard:
            ctx = ts.copy_ctx
            # the one nested call that is a memory effect of its own: copy(dest.grad, src.grad)
            if (
                ctx is None
                or ctx[0] != ts.guard
                or dest is None
                or dest is not getattr(ctx[2], "_grad", None)
                or src is not getattr(ctx[3], "_grad", None)
            ):
                return original(*args, **kwargs)
            parent = ctx[1]
            if getframe(2 * FRAMES).f_code is copy_code:
                site = ctx[5]  # called by the copy in progress: same user frame
        try:
            if site is None:
                frame = getframe(2 * FRAMES)
                site = rec.sites.by_pos.get((id(frame.f_code), frame.f_lasti))
                if site is None:
                    site = rec.sites.caller(2)
            seq = rec.reserve()
        except Exception as exc:
            rec.fail(exc)
            return original(*args, **kwargs)
        saved = ts.copy_ctx
        ts.guard += 1
        ctx = [ts.guard, seq, dest, src, False, site]
        ts.copy_ctx = ctx
        try:
            result = original(*args, **kwargs)
        except BaseException:
            rec.release(seq)
            raise
        finally:
            ts.guard -= 1
            ts.copy_ctx = saved
        try:
            detail: str | tuple[bytes, int] | None = None
            if dest_offset or src_offset or (count and count != getattr(src, "size", count)):
                detail = json.dumps(
                    {"dest_offset": int(dest_offset), "src_offset": int(src_offset), "count": int(count)}
                )
            graph = capture_of(rec, getattr(dest, "device", None)) if rec.captures else -1
            tape_id = current_tape(rec, ts)
            src_st = array_state(rec, src)
            dest_st = array_state(rec, dest)
            if (
                detail is None
                and parent < 0
                and src_st[2] in rec.ident.external
                and getattr(src, "deleter", None) is None  # not Warp memory made before start()
            ):
                ts.guard += 1  # reading the source's array interface is ours, not the program's
                try:
                    detail = _host_write(src)
                finally:
                    ts.guard -= 1
            rec.row(
                ts.thread, _COPY, tape_id, ctx[4], ts.phase, False, graph < 0, site,
                parent if parent >= 0 else ts.parent, -1, graph, None, detail,
                (
                    (src_st[1], src_st[2], ROLE_READ, src_st[3], state.src_dest[0], 0),
                    (dest_st[1], dest_st[2], ROLE_WRITE, FLAG_STORE | dest_st[3], state.src_dest[1], 0),
                ),
                seq,
            )  # fmt: skip
        except Exception as exc:
            rec.release(seq)  # its row will never come: the seq must not hold back the flushes
            rec.fail(exc)
        return result

    # record calls the original: its frame must look like Warp's too (see in_place_of)
    record = in_place_of(original, record)
    if positional_params(original, with_defaults=True) == _COPY_PARAMS and original.__defaults__ == (
        0,
        0,
        0,
        None,
    ):

        def copy(
            dest: Any, src: Any, dest_offset: Any = 0, src_offset: Any = 0, count: Any = 0, stream: Any = None
        ) -> Any:
            rec = state.rec
            if rec is None:
                return original(dest, src, dest_offset, src_offset, count, stream)
            try:
                ts = rec.local.state
            except AttributeError:
                ts = rec.thread_state()
            return record(rec, ts, dest, src, dest_offset, src_offset, count,
                          (dest, src, dest_offset, src_offset, count, stream), _NO_KWARGS)  # fmt: skip

        return mark(original, copy)

    def copy_generic(*args: Any, **kwargs: Any) -> Any:
        rec = state.rec
        if rec is None:
            return original(*args, **kwargs)
        try:
            ts = rec.local.state
        except AttributeError:
            ts = rec.thread_state()
        n = len(args)
        dest = args[0] if n else kwargs.get("dest")
        src = args[1] if n > 1 else kwargs.get("src")
        dest_offset = args[2] if n > 2 else kwargs.get("dest_offset", 0)
        src_offset = args[3] if n > 3 else kwargs.get("src_offset", 0)
        count = args[4] if n > 4 else kwargs.get("count", 0)
        return record(rec, ts, dest, src, dest_offset, src_offset, count, args, kwargs)

    return mark(original, copy_generic)


def _host_write(src: Any) -> str | tuple[bytes, int] | None:
    """The host-transfer detail of a copy from host memory Warp did not allocate (the copy
    behind ``wp.array(data=ndarray)`` and ``assign(ndarray)``); None when not on the CPU."""
    try:
        if not src.device.is_cpu:
            return None
        return deferred_detail("write", np.asarray(src), False)
    except Exception:
        return None


def _is_fresh(arr: Any, tok: object, last_seq: int) -> bool:
    """Initialisation of a fresh allocation (``wp.zeros``/``full``, grad allocation) with no
    event since: allocated in this session right after event ``last_seq``, the latest one."""
    attrs = getattr(arr, "__dict__", None)
    new = attrs.get(NEW) if attrs is not None else None
    return new is not None and new[0] is tok and new[3] >= 0 and new[2] == last_seq


def make_memset(original: Callable[..., Any], zero: bool) -> Callable[..., Any]:
    """``zero_``/``fill_``; the initialisation of a fresh allocation is not an event.

    ``zeros()``/``full()`` and every grad allocation initialise a fresh array: that
    test is inlined and comes right after the guard (one dict hit, no call). Warp's
    ``zero_(self)`` and ``fill_(self, value)`` get wrappers with those parameters.
    """

    def record(
        rec: Recorder,
        ts: ThreadState,
        self: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        checked: bool = False,
    ) -> Any:
        """The memset's event (``checked``: the caller handled "fresh" and the batch)."""
        zeroed = ts.zeroed
        # a gradient zeroed by Tape.zero() itself: the per-memset work is an append; its row
        # (or none, for an empty or fresh array) is written with the others when zero()
        # returns (record_zeroed)
        batched = (
            not checked
            and zeroed is not None
            and zero
            and getframe(2 * FRAMES).f_code is state.tape_zero_code
            and not rec.captures
        )
        if not batched:
            try:
                skip = getattr(self, "size", 1) == 0 or (
                    not checked and _is_fresh(self, rec.tok, rec.seq - 1)
                )
            except Exception as exc:
                rec.fail(exc)
                skip = True
            if skip:
                return original(self, *args, **kwargs)
        ts.guard += 1
        try:
            result = original(self, *args, **kwargs)
        finally:
            ts.guard -= 1
        if batched and zeroed is not None:
            zeroed.append(self)
            return result
        try:
            value: float | None = 0.0
            detail = None
            if not zero:
                raw = args[0] if args else kwargs.get("value")
                try:
                    value = float(raw)  # type: ignore[arg-type]
                except Exception:
                    value = None
                    detail = json.dumps({"value": repr(raw)[:200]})
            graph = capture_of(rec, self.device) if rec.captures else -1
            if graph in rec.executing_captures:
                graph = -1  # Warp < 1.15 runs a memset during a CPU capture and does not capture it
            tape_id = current_tape(rec, ts)
            frame = getframe(2 * FRAMES)
            site = rec.sites.by_pos.get((id(frame.f_code), frame.f_lasti))
            if site is None:
                if ts.scope_tape >= 0 and frame.f_code is state.tape_zero_code:
                    site = ts.scope_site  # a gradient zeroed by Tape.zero(): its call site
                else:
                    site = rec.sites.caller(2)
            st = getattr(self, STATE, None)
            if st is None or st[0] is not rec.tok:
                st = array_state(rec, self)
            rec.row(ts.thread, _MEMSET, tape_id, False, ts.phase, False, graph < 0, site, ts.parent, -1, graph,
                    value, detail, ((st[1], st[2], ROLE_WRITE, FLAG_STORE | st[3], 0, 0),), -1)  # fmt: skip
        except Exception as exc:
            rec.fail(exc)
        return result

    record = in_place_of(original, record)  # it calls the original (see in_place_of)
    params = positional_params(original)
    if zero and params == ("self",):

        def zero_(self: Any) -> Any:
            rec = state.rec
            if rec is None:
                return original(self)
            try:
                ts = rec.local.state
            except AttributeError:
                ts = rec.thread_state()
            if ts.guard:
                return original(self)
            try:
                new = self.__dict__.get(NEW)
            except AttributeError:
                new = None
            if new is not None and new[2] == rec.seq - 1 and new[0] is rec.tok and new[3] >= 0:
                return original(self)  # == _is_fresh (a fresh array is skipped when batched too)
            zeroed = ts.zeroed
            if zeroed is not None and getframe(FRAMES).f_code is state.tape_zero_code and not rec.captures:
                ts.guard += 1  # batched by Tape.zero() (see record): the row is written when it returns
                try:
                    result = original(self)
                finally:
                    ts.guard -= 1
                zeroed.append(self)
                return result
            return record(rec, ts, self, EMPTY, _NO_KWARGS, True)

        return mark(original, zero_)
    if not zero and params == ("self", "value"):

        def fill_(self: Any, value: Any) -> Any:
            rec = state.rec
            if rec is None:
                return original(self, value)
            try:
                ts = rec.local.state
            except AttributeError:
                ts = rec.thread_state()
            if ts.guard:
                return original(self, value)
            try:
                new = self.__dict__.get(NEW)
            except AttributeError:
                new = None
            if new is not None and new[2] == rec.seq - 1 and new[0] is rec.tok and new[3] >= 0:
                return original(self, value)  # == _is_fresh
            return record(rec, ts, self, (value,), _NO_KWARGS, True)

        return mark(original, fill_)

    def memset(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = state.rec
        if rec is None:
            return original(self, *args, **kwargs)
        try:
            ts = rec.local.state
        except AttributeError:
            ts = rec.thread_state()
        if ts.guard:
            return original(self, *args, **kwargs)
        return record(rec, ts, self, args, kwargs)

    return mark(original, memset)


def record_zeroed(
    rec: Recorder, ts: ThreadState, arrays: list[Any], tape_id: int, site: int, parent: int
) -> None:
    """The MEMSET rows of the gradients one ``Tape.zero()`` zeroed (see :func:`make_memset`):
    the rows the memset wrapper writes one by one elsewhere, in call order, under one lock
    (``parent``: the zero/reset event). No event happens inside ``zero()``'s own frame, so
    "fresh" and the sequence numbers are what they were at each memset."""
    tok = rec.tok
    thread, phase = ts.thread, ts.phase
    if phase:
        tape_id = ts.bw_tape
    lock = rec.lock
    lock.acquire()
    try:
        seq = rec.seq
        last_seq = seq - 1  # the zero/reset event: what "fresh" is measured against
        ev, acc, extra = rec.ev, rec.acc, rec.ev_extra
        # every column but seq is the same for the batch (one timestamp: the rows are
        # ordered by seq, and they were microseconds apart)
        head = (_MEMSET, tape_id, False, phase, False, True, site, -1, thread, perf_ns(), parent, -1, -1, -1)
        try:
            for arr in arrays:
                if getattr(arr, "size", 1) == 0 or _is_fresh(arr, tok, last_seq):
                    continue
                st = getattr(arr, STATE, None)
                if st is None or st[0] is not tok:
                    rec.seq = seq  # register writes rows that name the latest event
                    st = rec.ident.register(arr)
                ev.append(seq)
                ev.extend(head)
                extra.append((seq, 0.0, None))
                acc.extend((seq, st[1], st[2], ROLE_WRITE, FLAG_STORE | st[3], 0, 0))
                seq += 1
        finally:
            rec.seq = seq  # the rows appended keep their numbers, whatever raised
        if len(ev) >= rec.flush_ev_len or len(acc) >= rec.flush_acc_len or perf_ns() >= rec.flush_deadline:
            rec.flush()
    finally:
        lock.release()


def read_detail(arr: Any, result: Any) -> str | tuple[bytes, int] | None:
    """The ``detail`` of a value read of ``arr`` that returned ``result``: the host-transfer
    detail of an ndarray (its digest, and whether it is a zero-copy view), else None."""
    if not isinstance(result, np.ndarray):
        return None
    try:
        # on the CPU numpy() is a zero-copy view: the host may write the array through it
        # (an ndarray whose base is the array was made from its __array_interface__:
        # it starts at ptr; anything else is checked by address)
        view = result.size > 0 and (result.base is arr or result.ctypes.data == getattr(arr, "ptr", None))
        return deferred_detail("read", result, view)
    except Exception:
        return None


def make_value_read(original: Callable[..., Any]) -> Callable[..., Any]:
    """``numpy()``/``list()``: values read back to the host."""

    def value_read(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = state.rec
        if rec is None:
            return original(self, *args, **kwargs)
        try:
            ts = rec.local.state
        except AttributeError:
            ts = rec.thread_state()
        if ts.guard:
            return original(self, *args, **kwargs)
        ts.guard += 1
        try:
            result = original(self, *args, **kwargs)
        finally:
            ts.guard -= 1
        try:
            frame = getframe(FRAMES)
            site = rec.sites.by_pos.get((id(frame.f_code), frame.f_lasti))
            if site is None:
                site = rec.sites.caller()
            st = getattr(self, STATE, None)
            if st is None or st[0] is not rec.tok:
                st = array_state(rec, self)
            tape_id = current_tape(rec, ts)
            detail = read_detail(self, result)
            rec.row(ts.thread, _VALUE_READ, tape_id, False, ts.phase, False, True, site, ts.parent, st[1], -1,
                    None, detail, ((st[1], st[2], ROLE_READ, st[3], 0, 0),), -1)  # fmt: skip
        except Exception as exc:
            rec.fail(exc)
        return result

    return mark(original, value_read)


R, W, RW = (ROLE_READ, 0), (ROLE_WRITE, FLAG_STORE), (ROLE_READWRITE, FLAG_STORE)
NATIVE_ROLES: dict[str, dict[str, tuple[int, int]]] = {
    "array_scan": {"in_array": R, "out_array": W},
    "radix_sort_pairs": {"keys": RW, "values": RW},
    "segmented_sort_pairs": {"keys": RW, "values": RW, "segment_start_indices": R, "segment_end_indices": R},
    "runlength_encode": {"values": R, "run_values": W, "run_lengths": W, "run_count": W},
    "array_sum": {"values": R, "out": W},
    "array_inner": {"a": R, "b": R, "out": W},
}
# Not here: `array_cast`, which is Python over wp.copy/wp.launch (recorded as such, and on
# the tape when inside one, as Warp records its launch); wrapped as a native, its launch was
# hidden from the trace while Warp's tape replayed it.


def make_native(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    """An opaque native utility: one NATIVE event with conservative per-argument roles."""
    roles = NATIVE_ROLES.get(name, {})
    try:
        signature: inspect.Signature | None = inspect.signature(original)
    except (TypeError, ValueError):
        signature = None
    detail = json.dumps({"func": name})

    def native(*args: Any, **kwargs: Any) -> Any:
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
        try:
            if signature is not None:
                bound = signature.bind(*args, **kwargs).arguments
            else:
                bound = {f"arg{i}": a for i, a in enumerate(args)} | kwargs
            accesses = []
            for param, value in bound.items():
                if not isinstance(value, WARP_ARRAY) and not hasattr(value, "__ctype__"):
                    continue
                if not hasattr(value, "dtype"):
                    continue
                role, flags = roles.get(param, (ROLE_READWRITE, FLAG_UNCERTAIN))
                accesses.append(access_row(rec, value, role, flags, param))
            graph = -1
            if rec.captures and accesses:
                first = next(v for v in bound.values() if isinstance(v, WARP_ARRAY))
                graph = capture_of(rec, first.device)
            rec.emit(
                NATIVE,
                tape=current_tape(rec, ts),
                site=rec.sites.caller(),
                detail=detail,
                executed=graph < 0,
                ref_id=graph,
                accesses=tuple(accesses),
            )
        except Exception as exc:
            rec.fail(exc)
        return result

    return mark(original, native)


__all__ = [
    "NATIVE_ROLES",
    "make_copy",
    "make_memset",
    "make_native",
    "make_value_read",
    "record_zeroed",
]
