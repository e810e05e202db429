"""The wrappers: every Warp entry point that touches memory, turned into events.

Each ``make_*`` factory takes the original object and returns the wrapper that
:mod:`warptrace.record.install` puts in its place. Every wrapper starts with the same
two checks: no active recorder (the wrapper outlived ``stop()`` in some alias) or the
re-entrancy guard is up (warptrace's own calls into Warp, or a Warp call nested in an
already recorded one): then it is exactly the original call. Recording code runs in
``try``/``except`` blocks that hand errors to ``Recorder.fail``: a warptrace bug must
never change what the user's program does.

Access roles come from the kernel (``kernels.kernel_facts``), not from
``inputs=``/``outputs=``: Warp's own optimizers pass written arrays as inputs. For an
adjoint launch, the forward arrays are read (and written where the kernel
accumulates, since atomics replay), and each gradient argument gets the role that the
forward use of its array implies: a forward read accumulates into the gradient, a
forward store reads and consumes it (unless ``retain_grad``), a forward accumulation
reads it.

``Tape.record_launch`` is deliberately not wrapped: Warp stores the caller of its
``launch`` (our wrapper) as the tape entry's ``metadata["caller"]``, and the launch
wrapper puts the user's call site there after Warp appended the entry, which saves a
Python frame on every taped launch. Whether Warp taped a launch is read from
``len(tape.launches)`` before and after.

Objects keep small ``_warptrace_*`` attributes after ``stop()`` (arrays, tapes,
graphs, record_cmd launches); every value carries its session token, so a later
session ignores them.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import warp
import warp._src.context as _context

from warptrace.record.identity import NEW, STATE
from warptrace.record.recorder import EVENT_WIDTH, KIND_CODES, Recorder, ThreadState
from warptrace.trace.schema import (
    BACKWARD_BEGIN,
    BACKWARD_END,
    CAPTURE_BEGIN,
    CAPTURE_END,
    CAPTURE_LAUNCH,
    CMD_LAUNCH,
    COPY,
    FLAG_ACCUMULATE,
    FLAG_CONSUME,
    FLAG_FIELD,
    FLAG_GRAD,
    FLAG_STORE,
    FLAG_UNCERTAIN,
    LAUNCH,
    MEMSET,
    NATIVE,
    RECORD_FUNC,
    ROLE_NONE,
    ROLE_READ,
    ROLE_READWRITE,
    ROLE_WRITE,
    SET_GRAD,
    SET_REQUIRES_GRAD,
    TAPE_CREATE,
    TAPE_ENTER,
    TAPE_EXIT,
    TAPE_RESET,
    TAPE_ZERO,
    VALUE_READ,
)

# The active recorder, its threading.local (``.state``: a ThreadState) and session token.
_rec: Recorder | None = None
_local: Any = threading.local()
_tok: Any = None

TAPE_ATTR = "_warptrace_tape"  # (token, tape_id) on Tape objects
GRAPH_ATTR = "_warptrace_graph"  # (token, graph_id) on Graph objects
CMD_ARGS_ATTR = "_warptrace_args"  # (fwd_args, adj_args) on Launch objects (Warp < 1.19 keeps none)

_PATCHES_FILE = __file__
_getframe = sys._getframe
# Code of the originals whose nested events share the enclosing event's call site
# (set when the wrappers are made): wp.copy (its grad copy and record_func) and
# Tape.zero (its memsets). A nested event takes the shortcut only when its wrapper's
# caller is that very code, so no user frame can sit in between.
_COPY_CODE: Any = None
_TAPE_ZERO_CODE: Any = None
_json_names: dict[str, str] = {}
_EMPTY: tuple[Any, ...] = ()
_warp_array = warp.array
_ARRAY_INIT_CODE = warp.array.__init__.__code__
_perf_ns = time.perf_counter_ns
_WARP_VERSION = tuple(int(part) for part in warp.config.version.split(".")[:2] if part.isdigit())

_LAUNCH = KIND_CODES[LAUNCH]
_COPY = KIND_CODES[COPY]
_MEMSET = KIND_CODES[MEMSET]
_RECORD_FUNC = KIND_CODES[RECORD_FUNC]
_TAPE_CREATE = KIND_CODES[TAPE_CREATE]

# Per-session caches, reset by bind(): kernel object -> launch plan; dims -> code of
# "64"/"32x3" (Recorder.dim_code); generic kernel -> positions of its generic arguments.
_plans: dict[Any, LaunchPlan] = {}
_plans_by_facts: dict[int, tuple[Any, LaunchPlan]] = {}
_generic_plans: dict[tuple[Any, ...], LaunchPlan] = {}
_generic_args: dict[Any, tuple[int, ...] | None] = {}
_dims: dict[Any, int] = {}
_src_dest: tuple[int, int] = (0, 0)  # name codes of a copy's "src" and "dest"
_kernel_facts: Callable[..., Any] | None = None
_kernel_facts_resolved = False


def bind(rec: Recorder | None) -> None:
    """Point every wrapper at ``rec`` (None: all wrappers become pass-through)."""
    global _rec, _local, _tok, _kernel_facts_resolved, _src_dest
    _plans.clear()
    _plans_by_facts.clear()
    _generic_plans.clear()
    _generic_args.clear()
    _dims.clear()
    _kernel_facts_resolved = False
    if rec is None:
        _rec = None
        return
    _local = rec.local
    _tok = rec.tok
    _src_dest = (rec.name_code("src"), rec.name_code("dest"))
    _rec = rec


def _state() -> ThreadState:
    """This thread's recording state (only called while a recorder is bound)."""
    try:
        return _local.state
    except AttributeError:
        return _rec.thread_state()  # type: ignore[union-attr]


def _site(rec: Recorder) -> int:
    """Call site of the wrapper that calls this: its caller's position if that is a known
    user position (one dict hit), else the frame walk of ``Sites.caller``."""
    frame = _getframe(2)
    site = rec.sites.by_pos.get((id(frame.f_code), frame.f_lasti))
    return site if site is not None else rec.sites.caller(2)


def _wraps(original: Callable[..., Any], wrapper: Callable[..., Any]) -> Callable[..., Any]:
    functools.update_wrapper(wrapper, original)
    wrapper.__warptrace_original__ = original  # type: ignore[attr-defined]
    return wrapper


# ---------------------------------------------------------------------------- kernel plans
@dataclass
class _ArgFact:
    """Fallback argument facts (same attributes as ``kernels.ArgFact``)."""

    index: int
    name: str
    type: str
    field: str = ""
    is_array: bool = False
    read: bool = True
    write: bool = True
    store: bool = False
    accumulate: bool = False
    write_line: int = -1
    read_line: int = -1


@dataclass
class _KernelFacts:
    """Fallback kernel facts when ``warptrace.record.kernels`` is missing or failed."""

    key: str
    module: str
    file: str
    line: int
    source: str | None
    enable_backward: bool
    custom_grad: tuple[str, ...] = ()
    custom_replay: tuple[str, ...] = ()
    native_snippets: bool = False
    analysis: str = "failed: kernel analysis unavailable"
    args: tuple[_ArgFact, ...] = field(default_factory=tuple)


def _fallback_facts(kernel: Any, reason: str) -> _KernelFacts:
    """Every array argument (and struct array field) read and written, marked uncertain."""
    is_array = warp._src.types.is_array
    struct_type = warp._src.codegen.Struct
    rows: list[_ArgFact] = []

    def fields(index: int, name: str, var_type: Any, prefix: str, depth: int) -> None:
        for field_name, var in getattr(var_type, "vars", {}).items():
            path = prefix + field_name
            if is_array(var.type):
                rows.append(_ArgFact(index, name, str(var.type), path, True))
            elif isinstance(var.type, struct_type) and depth < 8:
                fields(index, name, var.type, path + ".", depth + 1)

    adj = kernel.adj
    for index, arg in enumerate(adj.args):
        rows.append(_ArgFact(index, arg.label, str(arg.type), "", bool(is_array(arg.type))))
        if isinstance(arg.type, struct_type):
            fields(index, arg.label, arg.type, "", 0)
    options = getattr(kernel, "options", {}) or {}
    enable_backward = options.get("enable_backward")
    if enable_backward is None:
        enable_backward = (getattr(kernel.module, "options", {}) or {}).get("enable_backward", True)
    try:
        source = adj.source
    except Exception:
        source = None
    return _KernelFacts(
        key=str(kernel.key),
        module=str(getattr(kernel.module, "name", "")),
        file=str(getattr(adj, "filename", "")),
        line=int(getattr(adj, "fun_lineno", -1) or -1),
        source=source,
        enable_backward=bool(enable_backward),
        analysis=f"failed: {reason}",
        args=tuple(rows),
    )


def _facts_for(kernel: Any, args: Sequence[Any] | None) -> Any:
    global _kernel_facts, _kernel_facts_resolved
    if not _kernel_facts_resolved:
        _kernel_facts_resolved = True
        try:
            from warptrace.record.kernels import kernel_facts  # written alongside; optional

            _kernel_facts = kernel_facts
        except Exception:
            _kernel_facts = None
    if _kernel_facts is None:
        return _fallback_facts(kernel, "warptrace.record.kernels unavailable")
    try:
        return _kernel_facts(kernel, args)
    except Exception as exc:  # the contract says it never raises; stay safe anyway
        return _fallback_facts(kernel, f"{type(exc).__name__}: {exc}")


class LaunchPlan:
    """Per-kernel access rows, precomputed so that a launch only looks up arrays.

    ``fwd`` rows: ``(arg index, name, field, path, role, flags)``; split into ``simple``
    (array arguments: ``(index, name, role, flags)``) and ``fields`` (struct fields, with
    their attribute ``path``) for the launch fast path.
    ``adj`` rows: ``(index, name, field, path, fwd_role, fwd_flags, grad_role, grad_flags,
    retained_grad_role, retained_grad_flags)``. ``name``/``field`` are
    :meth:`Recorder.name_code` codes.
    """

    __slots__ = ("adj", "facts", "fields", "fwd", "kernel_id", "simple")

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
            fwd.append((arg.index, name, field_name, path, *_forward_role(arg, uncertain)))
            adj.append((arg.index, name, field_name, path, *_adjoint_roles(arg, uncertain)))
        self.fwd = tuple(fwd)
        self.adj = tuple(adj)
        self.simple = tuple((i, name, role, flags) for i, name, _, path, role, flags in fwd if path is None)
        self.fields = tuple(row for row in fwd if row[3] is not None)


def _forward_role(arg: Any, uncertain: bool) -> tuple[int, int]:
    base = (FLAG_FIELD if arg.field else 0) | (FLAG_UNCERTAIN if uncertain else 0)
    if uncertain:
        return ROLE_READWRITE, base
    role = (ROLE_READ if arg.read else 0) | (ROLE_WRITE if arg.write else 0)
    flags = base
    if arg.store:
        flags |= FLAG_STORE
    if arg.write and arg.accumulate and not arg.store:
        flags |= FLAG_ACCUMULATE
    return role, flags


def _adjoint_roles(arg: Any, uncertain: bool) -> tuple[int, int, int, int, int, int]:
    base = (FLAG_FIELD if arg.field else 0) | (FLAG_UNCERTAIN if uncertain else 0)
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


def _plan(rec: Recorder, kernel: Any, args: Sequence[Any] | None) -> LaunchPlan:
    if getattr(kernel, "is_generic", False):
        # The overload depends on the argument types: key on what Warp infers them from.
        key = (kernel, _type_key(kernel, args or ()))
        plan = _generic_plans.get(key)
        if plan is None:
            facts = _facts_for(kernel, args)
            hit = _plans_by_facts.get(id(facts))
            if hit is not None and hit[0] is facts:
                plan = hit[1]
            else:
                plan = LaunchPlan(rec, rec.intern_kernel(facts), facts)
                _plans_by_facts[id(facts)] = (facts, plan)
            _generic_plans[key] = plan
        return plan
    plan = _plans.get(kernel)
    if plan is None:
        facts = _facts_for(kernel, args)
        plan = LaunchPlan(rec, rec.intern_kernel(facts), facts)
        _plans[kernel] = plan
    return plan


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
    positions = _generic_args.get(kernel, False)
    if positions is False:
        positions = _generic_positions(kernel, len(args))
        _generic_args[kernel] = positions
    if positions is None:
        positions = range(len(args))
    key = []
    for i in positions:
        value = args[i]
        kind = value.__class__
        if kind is _warp_array:
            key.append((value.dtype, value.ndim))
        else:
            cls = getattr(value, "_cls", None)
            key.append(kind if cls is None else cls)
    return tuple(key)


def _dim_code(rec: Recorder, dim: Any) -> int:
    """Recorder.dim_code of the launch dims "64" / "32x3" (-1 for None)."""
    try:
        code = _dims.get(dim)
    except TypeError:  # a list
        dim = tuple(dim)
        code = _dims.get(dim)
    if code is None:
        if isinstance(dim, int):
            text = str(dim)
        elif dim is None:
            return -1
        else:
            text = "x".join(str(int(d)) for d in dim)
        code = rec.dim_code(text)
        _dims[dim] = code
    return code


# ---------------------------------------------------------------------------- helpers
def _tape_id(rec: Recorder, tape: Any) -> int:
    """Monotonic tape id (``id()`` is reused); tapes made before start() get one on first sight."""
    if tape is None:
        return -1
    tagged = getattr(tape, TAPE_ATTR, None)
    if tagged is not None and tagged[0] is _tok:
        return tagged[1]
    tape_id = rec.new_id("next_tape")
    with contextlib.suppress(Exception):
        setattr(tape, TAPE_ATTR, (_tok, tape_id))
    rec.emit(TAPE_CREATE, tape=tape_id, detail='{"preexisting": true}', parent=-1)
    return tape_id


def _current_tape(rec: Recorder, tls: Any) -> int:
    """The tape an event belongs to: the one being backpropagated/zeroed, else the active one."""
    if tls.phase:
        return tls.bw_tape
    if tls.scope_tape >= 0:
        return tls.scope_tape
    runtime = _context.runtime
    tape = runtime.tape if runtime is not None else None
    return _tape_id(rec, tape) if tape is not None else -1


def _array_state(rec: Recorder, arr: Any) -> tuple[Any, ...]:
    st = getattr(arr, STATE, None)
    if st is not None and st[0] is _tok:
        return st
    with rec.lock:
        return rec.ident.register(arr)


def _access(
    rec: Recorder, arr: Any, role: int, flags: int, arg: str = "", field: str = ""
) -> tuple[int, ...]:
    """An access row for :meth:`Recorder.emit` (``arg``/``field`` coded)."""
    st = _array_state(rec, arr)
    return (st[1], st[2], role, flags | st[3], rec.name_code(arg), rec.name_code(field) if field else 0)


def _device_alias(device: Any) -> str:
    try:
        return str(_context.runtime.get_device(device).alias)
    except Exception:
        return str(device)


def _capture_of(rec: Recorder, device: Any) -> int:
    """Graph id when ``device`` is being captured (events there are not executed), else -1."""
    if not rec.captures:
        return -1
    return rec.captures.get(_device_alias(device), -1)


def _launch_device(device: Any, stream: Any) -> Any:
    return stream.device if stream is not None else device


def _append_launch_accesses(
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
    tok = _tok
    register = _rec.ident.register  # type: ignore[union-attr]
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


# ---------------------------------------------------------------------------- launch
# wp.launch's parameters, identical from Warp 1.13 to 1.19. The wrapper spells them out
# because forwarding *args/**kwargs costs ~0.35 µs a call; another signature gets the
# generic wrapper.
_LAUNCH_PARAMS = (
    "kernel", "dim", "inputs", "outputs", "adj_inputs", "adj_outputs", "device", "stream",
    "adjoint", "record_tape", "record_cmd", "max_blocks", "block_dim",
)  # fmt: skip


def _positional_params(function: Callable[..., Any]) -> tuple[str, ...] | None:
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind not in (p.POSITIONAL_OR_KEYWORD,) for p in params):
        return None
    return tuple(p.name for p in params)


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
    plan = _plans.get(kernel)
    if plan is None:
        plan = _plan(rec, kernel, [*inputs, *outputs])
    dim_code = _dims.get(dim) if dim.__class__ is int or dim.__class__ is tuple else None
    if dim_code is None:
        dim_code = _dim_code(rec, dim)
    graph = _capture_of(rec, _launch_device(device, stream)) if rec.captures else -1
    phase = ts.phase
    if phase:
        tape_id = ts.bw_tape
    elif tape is not None:
        tagged = getattr(tape, TAPE_ATTR, None)
        tape_id = tagged[1] if tagged is not None and tagged[0] is _tok else _tape_id(rec, tape)
    else:
        tape_id = -1
    recorded = tape is not None and len(tape.launches) > taped_before
    if recorded and site >= 0:
        metadata = tape.launches[-1][-1]  # Warp took "caller" from our frame: put the user back
        if metadata.__class__ is dict:
            metadata["caller"] = rec.sites.caller_dicts[site]
    t_ns = _perf_ns()
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
        _append_launch_accesses(acc, seq, plan, inputs, outputs, adjoint, adj_inputs, adj_outputs)
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
    if _positional_params(original) != _LAUNCH_PARAMS or len(defaults) != len(_LAUNCH_PARAMS) - 2:
        return _make_launch_generic(original)
    getframe = sys._getframe
    plans = _plans
    dims = _dims
    perf_ns = _perf_ns
    kernel_class = _context.Kernel

    def launch(
        kernel, dim, inputs, outputs, adj_inputs, adj_outputs, device, stream,
        adjoint, record_tape, record_cmd, max_blocks, block_dim,
    ):  # type: ignore[no-untyped-def]  # fmt: skip
        rec = _rec
        if rec is None:
            return original(kernel, dim, inputs, outputs, adj_inputs, adj_outputs, device, stream,
                            adjoint, record_tape, record_cmd, max_blocks, block_dim)  # fmt: skip
        try:
            ts = _local.state
        except AttributeError:
            ts = rec.thread_state()
        if ts.guard:
            return original(kernel, dim, inputs, outputs, adj_inputs, adj_outputs, device, stream,
                            adjoint, record_tape, record_cmd, max_blocks, block_dim)  # fmt: skip
        try:
            # Sites.by_pos holds user positions only: a hit means the caller is the user's line.
            frame = getframe(1)
            site = rec.sites.by_pos.get((id(frame.f_code), frame.f_lasti))
            if site is None:
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
                plan = _plan(rec, kernel, [*inputs, *outputs])
            dim_code = dims.get(dim) if dim.__class__ is int or dim.__class__ is tuple else None
            if dim_code is None:
                dim_code = _dim_code(rec, dim)
            phase = ts.phase
            if tape is not None:
                if phase:
                    tape_id = ts.bw_tape
                else:
                    tagged = getattr(tape, TAPE_ATTR, None)
                    tape_id = tagged[1] if tagged is not None and tagged[0] is _tok else _tape_id(rec, tape)
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
                    _append_launch_accesses(acc, seq, plan, inputs, outputs, True, adj_inputs, adj_outputs)
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
                tok = _tok
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

    launch.__defaults__ = defaults  # Warp's own default objects: the tape stores them
    return _wraps(original, launch)


def _make_launch_generic(original: Callable[..., Any]) -> Callable[..., Any]:
    """A launch with an unknown signature: bind arguments by name (slower, same events)."""
    signature = inspect.signature(original)

    def launch(*args: Any, **kwargs: Any) -> Any:
        rec = _rec
        if rec is None or _state().guard:
            return original(*args, **kwargs)
        ts = _state()
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
                named.get("inputs") or _EMPTY, named.get("outputs") or _EMPTY,
                named.get("adj_inputs") or _EMPTY, named.get("adj_outputs") or _EMPTY,
                named.get("device"), named.get("stream"), named.get("adjoint", False),
                named.get("record_cmd", False), result,
            )  # fmt: skip
        except Exception as exc:
            rec.fail(exc)
        return result

    return _wraps(original, launch)


def make_launch_replay(original: Callable[..., Any]) -> Callable[..., Any]:
    """``Launch.launch()``: a record_cmd launch executed (never taped)."""

    def launch(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = _rec
        tls = _state() if rec is not None else None
        if rec is None or tls.guard:
            return original(self, *args, **kwargs)
        result = original(self, *args, **kwargs)
        try:
            site = rec.sites.caller()
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
            graph = _capture_of(rec, self.device) if rec.captures else -1
            executed = graph < 0 or graph in rec.executing_captures
            if fwd_args is None:
                rec.emit(CMD_LAUNCH, tape=_current_tape(rec, tls), site=site, adjoint=adjoint,
                         executed=executed, ref_id=graph, detail='{"args": "unknown"}')  # fmt: skip
                return result
            with rec.lock:
                plan = _plan(rec, kernel, fwd_args)
                seq = rec.emit(
                    CMD_LAUNCH,
                    tape=_current_tape(rec, tls),
                    site=site,
                    kernel=plan.kernel_id,
                    adjoint=adjoint,
                    executed=executed,
                    ref_id=graph,
                    detail=detail,
                )
                _append_launch_accesses(
                    rec.acc, seq, plan, fwd_args, _EMPTY, adjoint, adj_args or _EMPTY, _EMPTY
                )
        except Exception as exc:
            rec.fail(exc)
        return result

    return _wraps(original, launch)


# ---------------------------------------------------------------------------- copies
def make_copy(original: Callable[..., Any]) -> Callable[..., Any]:
    global _COPY_CODE
    _COPY_CODE = getattr(original, "__code__", None)
    getframe = sys._getframe

    def copy(*args: Any, **kwargs: Any) -> Any:
        rec = _rec
        if rec is None:
            return original(*args, **kwargs)
        try:
            tls = _local.state
        except AttributeError:
            tls = rec.thread_state()
        parent = -1
        site = None
        dest = args[0] if args else kwargs.get("dest")
        src = args[1] if len(args) > 1 else kwargs.get("src")
        if tls.guard:
            ctx = tls.copy_ctx
            # the one nested call that is a memory effect of its own: copy(dest.grad, src.grad)
            if (
                ctx is None
                or ctx[0] != tls.guard
                or dest is None
                or dest is not getattr(ctx[2], "_grad", None)
                or src is not getattr(ctx[3], "_grad", None)
            ):
                return original(*args, **kwargs)
            parent = ctx[1]
            if getframe(1).f_code is _COPY_CODE:
                site = ctx[5]  # called by the copy in progress: same user frame
        try:
            if site is None:
                frame = getframe(1)
                site = rec.sites.by_pos.get((id(frame.f_code), frame.f_lasti))
                if site is None:
                    site = rec.sites.caller()
            seq = rec.reserve()
        except Exception as exc:
            rec.fail(exc)
            return original(*args, **kwargs)
        saved = tls.copy_ctx
        tls.guard += 1
        ctx = [tls.guard, seq, dest, src, False, site]
        tls.copy_ctx = ctx
        try:
            result = original(*args, **kwargs)
        except BaseException:
            rec.release(seq)
            raise
        finally:
            tls.guard -= 1
            tls.copy_ctx = saved
        try:
            n = len(args)
            dest_offset = args[2] if n > 2 else kwargs.get("dest_offset", 0)
            src_offset = args[3] if n > 3 else kwargs.get("src_offset", 0)
            count = args[4] if n > 4 else kwargs.get("count", 0)
            detail = None
            if dest_offset or src_offset or (count and count != getattr(src, "size", count)):
                detail = json.dumps(
                    {"dest_offset": int(dest_offset), "src_offset": int(src_offset), "count": int(count)}
                )
            graph = _capture_of(rec, getattr(dest, "device", None)) if rec.captures else -1
            tape_id = _current_tape(rec, tls)
            src_st = _array_state(rec, src)
            dest_st = _array_state(rec, dest)
            rec.row(
                tls.thread, _COPY, tape_id, ctx[4], tls.phase, False, graph < 0, site,
                parent if parent >= 0 else tls.parent, -1, graph, None, detail,
                (
                    (src_st[1], src_st[2], ROLE_READ, src_st[3], _src_dest[0], 0),
                    (dest_st[1], dest_st[2], ROLE_WRITE, FLAG_STORE | dest_st[3], _src_dest[1], 0),
                ),
                seq,
            )  # fmt: skip
        except Exception as exc:
            rec.fail(exc)
        return result

    return _wraps(original, copy)


# ---------------------------------------------------------------------------- memsets and reads
def _guarded(original: Callable[..., Any], self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    tls = _state()
    tls.guard += 1
    try:
        return original(self, *args, **kwargs)
    finally:
        tls.guard -= 1


def _is_fresh(rec: Recorder, arr: Any) -> bool:
    """Initialisation of a fresh allocation (``wp.zeros``/``full``, grad allocation) with no event since."""
    new = arr.__dict__.get(NEW) if hasattr(arr, "__dict__") else None
    return new is not None and new[0] is _tok and new[3] >= 0 and new[2] == rec.seq - 1


def make_memset(original: Callable[..., Any], zero: bool) -> Callable[..., Any]:
    getframe = sys._getframe

    def memset(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = _rec
        if rec is None:
            return original(self, *args, **kwargs)
        try:
            tls = _local.state
        except AttributeError:
            tls = rec.thread_state()
        if tls.guard:
            return original(self, *args, **kwargs)
        try:
            skip = getattr(self, "size", 1) == 0 or _is_fresh(rec, self)
        except Exception as exc:
            rec.fail(exc)
            skip = True
        if skip:
            return original(self, *args, **kwargs)
        tls.guard += 1
        try:
            result = original(self, *args, **kwargs)
        finally:
            tls.guard -= 1
        try:
            value: float | None = 0.0
            detail = None
            if not zero:
                raw = args[0] if args else kwargs.get("value")
                try:
                    value = float(raw)
                except Exception:
                    value = None
                    detail = json.dumps({"value": repr(raw)[:200]})
            graph = _capture_of(rec, self.device) if rec.captures else -1
            if graph in rec.executing_captures:
                graph = -1  # Warp < 1.15 runs a memset during a CPU capture and does not capture it
            tape_id = _current_tape(rec, tls)
            frame = getframe(1)
            site = rec.sites.by_pos.get((id(frame.f_code), frame.f_lasti))
            if site is None:
                if tls.scope_tape >= 0 and frame.f_code is _TAPE_ZERO_CODE:
                    site = tls.scope_site  # a gradient zeroed by Tape.zero(): its call site
                else:
                    site = rec.sites.caller()
            st = getattr(self, STATE, None)
            if st is None or st[0] is not _tok:
                st = _array_state(rec, self)
            rec.row(tls.thread, _MEMSET, tape_id, False, tls.phase, False, graph < 0, site, tls.parent, -1, graph,
                    value, detail, ((st[1], st[2], ROLE_WRITE, FLAG_STORE | st[3], 0, 0),), -1)  # fmt: skip
        except Exception as exc:
            rec.fail(exc)
        return result

    return _wraps(original, memset)


def make_value_read(original: Callable[..., Any]) -> Callable[..., Any]:
    """``numpy()``/``list()``: values read back to the host."""

    def value_read(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = _rec
        if rec is None or _state().guard:
            return original(self, *args, **kwargs)
        result = _guarded(original, self, args, kwargs)
        try:
            access = _access(rec, self, ROLE_READ, 0)
            rec.emit(
                VALUE_READ,
                tape=_current_tape(rec, _state()),
                site=rec.sites.caller(),
                array_id=access[0],
                accesses=(access,),
            )
        except Exception as exc:
            rec.fail(exc)
        return result

    return _wraps(original, value_read)


# ---------------------------------------------------------------------------- native utilities
R, W, RW = (ROLE_READ, 0), (ROLE_WRITE, FLAG_STORE), (ROLE_READWRITE, FLAG_STORE)
NATIVE_ROLES: dict[str, dict[str, tuple[int, int]]] = {
    "array_scan": {"in_array": R, "out_array": W},
    "radix_sort_pairs": {"keys": RW, "values": RW},
    "segmented_sort_pairs": {"keys": RW, "values": RW, "segment_start_indices": R, "segment_end_indices": R},
    "runlength_encode": {"values": R, "run_values": W, "run_lengths": W, "run_count": W},
    "array_sum": {"values": R, "out": W},
    "array_inner": {"a": R, "b": R, "out": W},
    "array_cast": {"in_array": R, "out_array": W},
}


def make_native(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    """An opaque native utility: one NATIVE event with conservative per-argument roles."""
    roles = NATIVE_ROLES.get(name, {})
    try:
        signature: inspect.Signature | None = inspect.signature(original)
    except (TypeError, ValueError):
        signature = None
    detail = json.dumps({"func": name})

    def native(*args: Any, **kwargs: Any) -> Any:
        rec = _rec
        tls = _state() if rec is not None else None
        if rec is None or tls.guard:
            return original(*args, **kwargs)
        tls.guard += 1
        try:
            result = original(*args, **kwargs)
        finally:
            tls.guard -= 1
        try:
            if signature is not None:
                bound = signature.bind(*args, **kwargs).arguments
            else:
                bound = {f"arg{i}": a for i, a in enumerate(args)} | kwargs
            accesses = []
            for param, value in bound.items():
                if not isinstance(value, _warp_array) and not hasattr(value, "__ctype__"):
                    continue
                if not hasattr(value, "dtype"):
                    continue
                role, flags = roles.get(param, (ROLE_READWRITE, FLAG_UNCERTAIN))
                accesses.append(_access(rec, value, role, flags, param))
            graph = -1
            if rec.captures and accesses:
                first = next(v for v in bound.values() if isinstance(v, _warp_array))
                graph = _capture_of(rec, first.device)
            rec.emit(
                NATIVE,
                tape=_current_tape(rec, tls),
                site=rec.sites.caller(),
                detail=detail,
                executed=graph < 0,
                ref_id=graph,
                accesses=tuple(accesses),
            )
        except Exception as exc:
            rec.fail(exc)
        return result

    return _wraps(original, native)


# ---------------------------------------------------------------------------- allocations
def make_init_new(original: Callable[..., Any]) -> Callable[..., Any]:
    """``array._init_new``: the single path to fresh device memory."""

    def _init_new(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        rec = _rec
        if rec is None:
            return result
        tls = _state()
        try:
            owner = tls.grad_owner
            labelled = False
            if owner is not None:
                tls.grad_owner = None
                new = owner.__dict__.get(NEW)
                site = new[1] if new is not None and new[0] is _tok else -1
            elif tls.guard:
                site = -1
            else:
                site, labelled = rec.sites.alloc_caller(_ARRAY_INIT_CODE)
            with rec.lock:
                rec.ident.on_new(self, site, owner, labelled)
        except Exception as exc:
            rec.fail(exc)
        return result

    return _wraps(original, _init_new)


def make_init_from_ptr(original: Callable[..., Any]) -> Callable[..., Any]:
    """``array._init_from_ptr``: views, aliases, zero-copy memory; resolved at first use."""

    def _init_from_ptr(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        rec = _rec
        if rec is None:
            return result
        try:
            site, labelled = (-1, False) if _state().guard else rec.sites.alloc_caller(_ARRAY_INIT_CODE)
            rec.ident.on_ptr(self, site, labelled)
        except Exception as exc:
            rec.fail(exc)
        return result

    return _wraps(original, _init_from_ptr)


def make_alloc_grad(original: Callable[..., Any]) -> Callable[..., Any]:
    """``array._alloc_grad``: the next fresh allocation is this array's grad."""

    def _alloc_grad(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = _rec
        if rec is None:
            return original(self, *args, **kwargs)
        tls = _state()
        saved = tls.grad_owner
        tls.grad_owner = self
        try:
            result = original(self, *args, **kwargs)
        finally:
            tls.grad_owner = saved
        # An array registered before its grad existed (wp.array(data, requires_grad=True)
        # copies its data, and so gets registered, before it sets _requires_grad) carries
        # requires_grad=False in its arrays row: say that it has a grad from now on.
        # (The requires_grad setter reports itself: skip when it is the caller.)
        st = getattr(self, STATE, None)
        from_setter = sys._getframe(1).f_code.co_name == "requires_grad"
        if st is not None and st[0] is _tok and not tls.guard and not from_setter:
            try:
                rec.emit(
                    SET_REQUIRES_GRAD,
                    tape=_current_tape(rec, tls),
                    site=rec.sites.caller(),
                    array_id=st[1],
                    value=1.0,
                )
            except Exception as exc:
                rec.fail(exc)
        return result

    return _wraps(original, _alloc_grad)


# ---------------------------------------------------------------------------- gradient attributes
def make_flag_setter(original: Callable[..., Any], kind: str) -> Callable[..., Any]:
    """``requires_grad`` / ``retain_grad`` setters."""

    def setter(self: Any, value: Any) -> None:
        rec = _rec
        if rec is None or _state().guard:
            return original(self, value)
        try:
            array_id = _array_state(rec, self)[1]
        except Exception as exc:
            rec.fail(exc)
            return original(self, value)
        original(self, value)
        try:
            rec.emit(
                kind,
                tape=_current_tape(rec, _state()),
                site=rec.sites.caller(),
                array_id=array_id,
                value=1.0 if value else 0.0,
            )
        except Exception as exc:
            rec.fail(exc)
        return None

    return _wraps(original, setter)


def make_grad_setter(original: Callable[..., Any]) -> Callable[..., Any]:
    def setter(self: Any, grad: Any) -> None:
        rec = _rec
        if rec is None or _state().guard:
            return original(self, grad)
        if sys._getframe(1).f_code is _ARRAY_INIT_CODE:
            # wp.array(..., grad=g) and the grad views Warp builds for slices: a link, not a change
            original(self, grad)
            try:
                with rec.lock:
                    rec.ident.link_grad(self, grad)
            except Exception as exc:
                rec.fail(exc)
            return None
        try:
            owner_st = _array_state(rec, self)
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
                tape=_current_tape(rec, _state()),
                site=rec.sites.caller(),
                array_id=owner_st[1],
                ref_id=ref_id,
            )
        except Exception as exc:
            rec.fail(exc)
        return None

    return _wraps(original, setter)


def wrap_property(
    prop: property, make_setter: Callable[[Callable[..., Any]], Callable[..., Any]]
) -> property:
    return property(prop.fget, make_setter(prop.fset), prop.fdel, prop.__doc__)


# ---------------------------------------------------------------------------- tape
def _tape_event(kind: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """__enter__/__exit__: the Warp call, then the event."""
    code = KIND_CODES[kind]

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(self, *args, **kwargs)
            rec = _rec
            if rec is None:
                return result
            try:
                tls = _local.state
            except AttributeError:
                tls = rec.thread_state()
            if tls.guard:
                return result
            try:
                tagged = getattr(self, TAPE_ATTR, None)
                tape_id = tagged[1] if tagged is not None and tagged[0] is _tok else _tape_id(rec, self)
                rec.row(tls.thread, code, tape_id, False, tls.phase, False, True, _site(rec), -1, -1, -1, None,
                        None, (), -1)  # fmt: skip
            except Exception as exc:
                rec.fail(exc)
            return result

        return _wraps(original, method)

    return make


make_tape_enter = _tape_event(TAPE_ENTER)
make_tape_exit = _tape_event(TAPE_EXIT)


def make_tape_init(original: Callable[..., Any]) -> Callable[..., Any]:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        rec = _rec
        if rec is None:
            return
        try:
            with rec.lock:
                tape_id = rec.next_tape
                rec.next_tape = tape_id + 1
            setattr(self, TAPE_ATTR, (_tok, tape_id))
            tls = _state()
            rec.row(tls.thread, _TAPE_CREATE, tape_id, False, tls.phase, False, True, _site(rec), -1, -1, -1, None,
                    None, (), -1)  # fmt: skip
        except Exception as exc:
            rec.fail(exc)

    return _wraps(original, __init__)


def make_tape_scoped(kind: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """zero()/reset(): the event first; the memsets it causes name it as parent."""

    code = KIND_CODES[kind]

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        global _TAPE_ZERO_CODE
        if kind == TAPE_ZERO:
            _TAPE_ZERO_CODE = getattr(original, "__code__", None)

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            rec = _rec
            tls = _state() if rec is not None else None
            if rec is None or tls.guard:
                return original(self, *args, **kwargs)
            try:
                tape_id = _tape_id(rec, self)
                site = _site(rec)
                seq = rec.row(tls.thread, code, tape_id, False, tls.phase, False, True, site, tls.parent, -1, -1, None,
                              None, (), -1)  # fmt: skip
            except Exception as exc:
                rec.fail(exc)
                return original(self, *args, **kwargs)
            saved = tls.parent, tls.scope_tape, tls.scope_site
            tls.parent, tls.scope_tape, tls.scope_site = seq, tape_id, site
            try:
                return original(self, *args, **kwargs)
            finally:
                tls.parent, tls.scope_tape, tls.scope_site = saved

        return _wraps(original, method)

    return make


make_tape_zero = make_tape_scoped(TAPE_ZERO)
make_tape_reset = make_tape_scoped(TAPE_RESET)


def make_tape_backward(original: Callable[..., Any]) -> Callable[..., Any]:
    def backward(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = _rec
        tls = _state() if rec is not None else None
        if rec is None or tls.guard:
            return original(self, *args, **kwargs)
        try:
            tape_id = _tape_id(rec, self)
            site = rec.sites.caller()
            loss = args[0] if args else kwargs.get("loss")
            grads = args[1] if len(args) > 1 else kwargs.get("grads")
            loss_id = _array_state(rec, loss)[1] if loss is not None else -1
            detail = None
            if grads:
                detail = json.dumps({"grads": [_array_state(rec, a)[1] for a in grads]})
            rec.emit(BACKWARD_BEGIN, tape=tape_id, phase=1, site=site, array_id=loss_id, detail=detail)
        except Exception as exc:
            rec.fail(exc)
            return original(self, *args, **kwargs)
        saved = (tls.phase, tls.bw_tape)
        tls.phase, tls.bw_tape = 1, tape_id
        try:
            return original(self, *args, **kwargs)
        finally:
            tls.phase, tls.bw_tape = saved
            try:
                rec.emit(BACKWARD_END, tape=tape_id, phase=1, site=site, array_id=loss_id)
            except Exception as exc:
                rec.fail(exc)

    return _wraps(original, backward)


def make_record_func(original: Callable[..., Any]) -> Callable[..., Any]:
    def record_func(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        rec = _rec
        if rec is None:
            return result
        tls = _state()
        ctx = tls.copy_ctx
        site = None
        if tls.guard:
            if ctx is None or ctx[0] != tls.guard:
                return result
            ctx[4] = True  # the copy in progress is recorded on the tape
            parent = ctx[1]
            if _getframe(1).f_code is _COPY_CODE:
                site = ctx[5]  # recorded by the copy in progress: same user frame
        else:
            parent = tls.parent
        try:
            backward = args[0] if args else kwargs.get("backward")
            arrays = args[1] if len(args) > 1 else kwargs.get("arrays", ())
            name = getattr(backward, "__qualname__", type(backward).__name__)
            ids = [_array_state(rec, a)[1] for a in arrays or () if isinstance(a, _warp_array)]
            tape_id = _tape_id(rec, self)
            if site is None:
                site = _site(rec)
            quoted = _json_names.get(name) if name.__class__ is str else None
            if quoted is None:
                quoted = json.dumps(name)
                if name.__class__ is str:
                    _json_names[name] = quoted
            # == json.dumps({"func": name, "arrays": ids}), without the encoder's per-call setup
            detail = '{"func": ' + quoted + ', "arrays": [' + ", ".join([str(i) for i in ids]) + "]}"
            rec.row(tls.thread, _RECORD_FUNC, tape_id, True, tls.phase, False, True, site, parent, -1, -1, None,
                    detail, (), -1)  # fmt: skip
        except Exception as exc:
            rec.fail(exc)
        return result

    return _wraps(original, record_func)


# ---------------------------------------------------------------------------- graph capture
def make_capture_begin(original: Callable[..., Any]) -> Callable[..., Any]:
    def capture_begin(*args: Any, **kwargs: Any) -> Any:
        rec = _rec
        if rec is None or _state().guard:
            return original(*args, **kwargs)
        result = original(*args, **kwargs)
        try:
            stream = args[1] if len(args) > 1 else kwargs.get("stream")
            device = stream.device if stream is not None else (args[0] if args else kwargs.get("device"))
            graph_id = rec.new_id("next_graph")
            alias = _device_alias(device)
            detail = None
            with rec.lock:
                rec.captures[alias] = graph_id
                if alias == "cpu" and _WARP_VERSION < (1, 15):
                    # CPU capture before Warp 1.15 runs launches and memsets as it records them
                    rec.executing_captures.add(graph_id)
                    detail = '{"executes_during_capture": true}'
            rec.emit(
                CAPTURE_BEGIN,
                tape=_current_tape(rec, _state()),
                site=rec.sites.caller(),
                ref_id=graph_id,
                detail=detail,
            )
        except Exception as exc:
            rec.fail(exc)
        return result

    return _wraps(original, capture_begin)


def make_capture_end(original: Callable[..., Any]) -> Callable[..., Any]:
    def capture_end(*args: Any, **kwargs: Any) -> Any:
        rec = _rec
        if rec is None or _state().guard:
            return original(*args, **kwargs)
        graph = original(*args, **kwargs)
        try:
            alias = _device_alias(graph.device) if graph is not None else None
            with rec.lock:
                graph_id = rec.captures.pop(alias, -1) if alias is not None else -1
                if graph_id < 0 and len(rec.captures) == 1:
                    graph_id = rec.captures.popitem()[1]
            if graph is not None and graph_id >= 0:
                setattr(graph, GRAPH_ATTR, (_tok, graph_id))
            rec.emit(CAPTURE_END, tape=_current_tape(rec, _state()), site=rec.sites.caller(), ref_id=graph_id)
        except Exception as exc:
            rec.fail(exc)
        return graph

    return _wraps(original, capture_end)


def make_capture_launch(original: Callable[..., Any]) -> Callable[..., Any]:
    def capture_launch(*args: Any, **kwargs: Any) -> Any:
        rec = _rec
        if rec is None or _state().guard:
            return original(*args, **kwargs)
        result = _guarded_call(original, args, kwargs)
        try:
            graph = args[0] if args else kwargs.get("graph")
            tagged = getattr(graph, GRAPH_ATTR, None)
            detail = None
            if tagged is not None and tagged[0] is _tok:
                graph_id = tagged[1]
            else:
                graph_id = rec.new_id("next_graph")
                setattr(graph, GRAPH_ATTR, (_tok, graph_id))
                detail = '{"captured": "before tracing started"}'
            rec.emit(
                CAPTURE_LAUNCH,
                tape=_current_tape(rec, _state()),
                site=rec.sites.caller(),
                ref_id=graph_id,
                detail=detail,
            )
        except Exception as exc:
            rec.fail(exc)
        return result

    return _wraps(original, capture_launch)


def _guarded_call(original: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    tls = _state()
    tls.guard += 1
    try:
        return original(*args, **kwargs)
    finally:
        tls.guard -= 1


__all__ = ["EVENT_WIDTH", "NATIVE_ROLES", "LaunchPlan", "bind"]
