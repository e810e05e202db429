"""Values on request (``--check-numerics``): summaries of the arrays each event wrote.

Off by default, and then nothing here runs: :func:`wrap_factory` puts an outer wrapper
around the ordinary ones (launch, copy, memset, ``Tape.backward``) only when the session
was started with ``numerics=True``; without it the recorder's own wrappers are installed
unchanged, so the hot paths keep their speed and nothing is read.

With it, after every executed forward launch, adjoint launch, copy and memset, each array
the event wrote is summarized (:func:`summarize`: element count, non-finite count, exact
zeros, first non-finite index, min, max, L2 norm, content hash) into the ``numerics``
table, keyed by the event's ``seq`` and the array's ``array_id`` (see
:mod:`warptrace.trace.schema`). Arrays a launch only read are summarized too when the
launch wrote a non-finite value (WT501 needs to know its inputs were finite) or when the
kernel reaches a custom adjoint (WT502 draws its test inputs from their ranges). After
each ``Tape.backward``: the loss, and the values and gradient buffer of every candidate leaf
(an array with a gradient that a launch or copy read inside the tape's scope); for a leaf of
at most ``LEAF_CHANGE_MAX`` elements, also the change of both since the previous backward (one
float64 copy of each is kept): the divergence check estimates the curvature along the
optimizer's path from them.

How the event's ``seq`` is known: the outer wrapper holds the session lock (re-entrant)
around the inner call, so the events appended meanwhile are exactly this call's. Values
are read under the guard (a summary is never a ``value_read`` event) through
``array.numpy()``, zero-copy on the CPU; a CUDA array is copied to the host (a reduction
kernel on the device is future work). Reading never writes: results stay bit-identical.

At ``stop()`` (after the wrappers are removed, so nothing is recorded) the custom
adjoints reached by recorded kernels are checked against finite differences
(:mod:`warptrace.record.adjoint_check`) and the results go to ``meta.json``.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import warp._src.context as _context

from warptrace.record import state
from warptrace.record.adjoint_check import check_custom_adjoints
from warptrace.record.session import Recorder
from warptrace.record.wrap.common import ORIGINAL_ATTR, WARP_ARRAY, array_state, mark
from warptrace.record.wrap.plans import plan_for
from warptrace.trace import schema
from warptrace.trace.schema import (
    LEAF_CHANGE_BUDGET,
    LEAF_CHANGE_MAX,
    NUM_GRAD_CHANGE,
    NUM_INPUT,
    NUM_LEAF,
    NUM_LEAF_CHANGE,
    NUM_LEAF_GRAD,
    NUM_LOSS,
    NUM_STEP,
    NUM_WRITE,
    ROLE_READ,
    ROLE_WRITE,
)

FLUSH_ROWS = 4096


@functools.cache
def _width() -> int:
    """Columns of a numerics row (from the schema at the first use: no pyarrow at import)."""
    return len(schema.SCHEMAS["numerics"].names)


Summary = tuple[int, int, int, int, "float | None", "float | None", float, str]


def _values(arr: Any) -> np.ndarray:
    """The array's values as numpy (zero-copy on the CPU), past the ``value_read`` wrapper."""
    numpy = type(arr).numpy
    return np.asarray(getattr(numpy, ORIGINAL_ATTR, numpy)(arr))


def summarize(arr: Any) -> Summary | None:
    """(count, nonfinite, zeros, first_bad, min, max, l2, hash) of an array's values, or None
    for arrays without numeric scalar values (structs, opaque arrays, empty arrays)."""
    if not isinstance(arr, WARP_ARRAY) or not getattr(arr, "size", 0) or not arr.ptr:
        return None
    values = _values(arr)
    if values.dtype.kind not in "fiub":
        return None
    flat = np.ascontiguousarray(values).reshape(-1)
    digest = hashlib.blake2b(flat.view(np.uint8).data, digest_size=8).hexdigest()
    count = int(flat.size)
    zeros = int(count - np.count_nonzero(flat))
    nonfinite = 0
    first_bad = -1
    finite = flat
    if flat.dtype.kind == "f":
        ok = np.isfinite(flat)
        nonfinite = int(count - np.count_nonzero(ok))
        if nonfinite:
            first_bad = int(np.argmin(ok))
            finite = flat[ok]
    if finite.size == 0:
        return (count, nonfinite, zeros, first_bad, None, None, 0.0, digest)
    wide = finite.astype(np.float64)
    return (
        count,
        nonfinite,
        zeros,
        first_bad,
        float(wide.min()),
        float(wide.max()),
        float(np.sqrt(np.dot(wide, wide))),
        digest,
    )


def _change(after: Any, before: Any) -> Summary | None:
    """The summary of ``after - before`` (two arrays of one shape), without a hash."""
    a, b = _values(after), _values(before)
    if a.dtype.kind != "f" or a.shape != b.shape:
        return None
    return _difference(a.astype(np.float64).reshape(-1), b.astype(np.float64).reshape(-1))


def _difference(after: np.ndarray, before: np.ndarray) -> Summary:
    """The summary of ``after - before`` (flat float64 arrays of one size), without a hash."""
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf is NaN: counted, not warned
        diff = after - before
    ok = np.isfinite(diff)
    nonfinite = int(diff.size - np.count_nonzero(ok))
    finite = diff[ok]
    low = float(finite.min()) if finite.size else None
    high = float(finite.max()) if finite.size else None
    return (
        int(diff.size),
        nonfinite,
        int(diff.size - np.count_nonzero(diff)),
        int(np.argmin(ok)) if nonfinite else -1,
        low,
        high,
        float(np.sqrt(np.dot(finite, finite))),
        "",
    )


class Numerics:
    """The numerics side of one session: the summary rows and what WT502 needs at the end."""

    def __init__(self, rec: Recorder) -> None:
        self.rec = rec
        self.lock = threading.Lock()
        self.rows: list[Any] = []
        # tape -> {id(array): weakref}: arrays with a gradient read inside the tape's scope
        self.candidates: weakref.WeakKeyDictionary[Any, dict[int, Any]] = weakref.WeakKeyDictionary()
        # kernels reaching a custom adjoint: kernel_id -> (kernel, [(lo, hi)] ranges of inputs)
        self.custom: dict[int, tuple[Any, list[tuple[float, float]]]] = {}
        # kernel_id -> {id(array): (array, arg)} written by the kernel's last forward launch
        self.last_writes: dict[int, dict[int, tuple[Any, str]]] = {}
        # leaf array_id -> (the leaf, weakly; values; gradient) at the last backward that
        # summarized it (float64, flat; leaves of at most LEAF_CHANGE_MAX elements, at most
        # LEAF_CHANGE_BUDGET elements in all; entries of leaves that died are dropped)
        self.previous: dict[int, tuple[Any, np.ndarray, np.ndarray]] = {}
        self.previous_size = 0
        self.purge_at = 256  # entries: drop the dead ones when there are this many

    # ---------------------------------------------------------------- rows
    def add(
        self, seq: int, arr: Any, what: str, arg: str = "", field: str = "", owner: int = -1
    ) -> Summary | None:
        summary = summarize(arr)
        if summary is None:
            return None
        if summary[1] and self.rec.gate is not None:  # a non-finite value: the flight recorder writes
            self.rec.gate.nonfinite()
        array_id = array_state(self.rec, arr)[1]
        with self.lock:
            self.rows.extend((seq, array_id, owner, what, arg, field, *summary))
            full = len(self.rows) >= FLUSH_ROWS * _width()
        if full:
            self.flush()
        return summary

    def write(self, seq: int, arr: Any) -> None:
        """The summary of an array a memset wrote."""
        self.add(seq, arr, NUM_WRITE)

    def flush(self) -> None:
        """Queue the rows for the writer thread (FIFO: after the events flushed before them)."""
        with self.lock:
            rows, self.rows = self.rows, []
        if not rows:
            return
        rec = self.rec
        # not forced (an open event's part stays whole); summaries that reach the disk before
        # their event are joined when the trace is read, or trimmed after a crash
        rec.flush()
        with rec.lock:
            if not rec.closed:
                rec.submit((("numerics", rows),))

    # ---------------------------------------------------------------- events
    def after_launch(self, seq: int, named: dict[str, Any]) -> None:
        kernel = named["kernel"]
        inputs, outputs = named.get("inputs") or (), named.get("outputs") or ()
        args = [*inputs, *outputs]
        plan = plan_for(self.rec, kernel, args)
        names = self.rec.names
        adjoint = bool(named.get("adjoint"))
        written: list[tuple[Any, str, str]] = []
        read: list[tuple[Any, str, str]] = []
        if not adjoint:
            for index, arg, field_path, path, role, _flags in plan.fwd:
                value = _resolve(args, index, path)
                if value is None:
                    continue
                item = (value, names[arg], names[field_path])
                if role & ROLE_WRITE:
                    written.append(item)
                elif role & ROLE_READ:
                    read.append(item)
        else:
            adj_args = [*(named.get("adj_inputs") or ()), *(named.get("adj_outputs") or ())]
            for index, arg, field_path, path, frole, _ff, grole, _gf, rrole, _rf in plan.adj:
                value = _resolve(args, index, path)
                grad = _resolve(adj_args, index, path) if index < len(adj_args) else None
                label = (names[arg], names[field_path])
                if value is not None and frole & ROLE_READ:
                    read.append((value, *label))
                if grad is not None:
                    if (grole | rrole) & ROLE_WRITE:
                        written.append((grad, *label))
                    elif grole & ROLE_READ:
                        read.append((grad, *label))
        bad = False
        for value, arg, field_path in written:
            summary = self.add(seq, value, NUM_WRITE, arg, field_path)
            bad = bad or (summary is not None and summary[1] > 0)
        custom = bool(getattr(plan.facts, "custom_grad", ())) and not adjoint
        if bad or custom:
            ranges: list[tuple[float, float]] = []
            for value, arg, field_path in read:
                summary = self.add(seq, value, NUM_INPUT, arg, field_path)
                if summary is not None and summary[4] is not None and summary[5] is not None:
                    ranges.append((summary[4], summary[5]))
            if custom:
                entry = self.custom.setdefault(plan.kernel_id, (kernel, []))
                entry[1].extend(ranges)
        if not adjoint:
            self._note_reads(read)
            self._chain_step(seq, plan.kernel_id, read, written)

    def _chain_step(
        self,
        seq: int,
        kernel_id: int,
        read: Sequence[tuple[Any, str, str]],
        written: Sequence[tuple[Any, str, str]],
    ) -> None:
        """A launch reading what the previous launch of its kernel wrote: summarize the change
        from that input to its output of the same role (an iteration step, for WT504)."""
        previous = self.last_writes.get(kernel_id, {})
        self.last_writes[kernel_id] = {id(value): (value, arg) for value, arg, field in written if not field}
        outputs = {arg: value for value, arg, field in written if not field}
        for value, _arg, field in read:
            hit = previous.get(id(value))
            if field or hit is None or hit[0] is not value:
                continue
            output = outputs.get(hit[1])
            if output is None or output is value or getattr(output, "shape", None) != value.shape:
                continue
            summary = _change(output, value)
            if summary is not None:
                with self.lock:
                    self.rows.extend(
                        (seq, array_state(self.rec, output)[1], array_state(self.rec, value)[1], NUM_STEP, hit[1], "",
                         *summary)
                    )  # fmt: skip

    def _note_reads(self, read: Sequence[tuple[Any, str, str]]) -> None:
        runtime = _context.runtime
        tape = runtime.tape if runtime is not None else None
        if tape is None:
            return
        seen = self.candidates.setdefault(tape, {})
        for value, _arg, _field in read:
            if isinstance(value, WARP_ARRAY) and value.requires_grad and id(value) not in seen:
                seen[id(value)] = weakref.ref(value)

    def after_copy(self, seq: int, dest: Any, src: Any) -> None:
        self.add(seq, dest, NUM_WRITE, "dest")
        self._note_reads(((src, "src", ""),))

    def after_backward(self, seq: int, tape: Any, loss: Any) -> None:
        if loss is not None:
            self.add(seq, loss, NUM_LOSS)
        produced = set()
        for entry in getattr(tape, "launches", ()):
            if isinstance(entry, (list, tuple)) and len(entry) > 4:
                for out in entry[4]:
                    if isinstance(out, WARP_ARRAY):
                        produced.add(out.ptr)
        for leaf in _alive(self.candidates.get(tape, {})):
            grad = leaf.grad
            if grad is None or leaf.ptr in produced:
                continue
            leaf_id = array_state(self.rec, leaf)[1]
            self.add(seq, grad, NUM_LEAF_GRAD, owner=leaf_id)
            if self.add(seq, leaf, NUM_LEAF) is not None:
                self._leaf_change(seq, leaf, leaf_id, grad)

    def _leaf_change(self, seq: int, leaf: Any, leaf_id: int, grad: Any) -> None:
        """The change of a small leaf and of its gradient since the previous backward that
        summarized it (one copy of each kept): the secant curvature along the optimizer's path."""
        before = self.previous.pop(leaf_id, None)
        if before is not None:
            self.previous_size -= before[1].size
        size = int(getattr(leaf, "size", 0))
        if size > LEAF_CHANGE_MAX or getattr(grad, "shape", None) != leaf.shape:
            return
        if self.previous_size + size > LEAF_CHANGE_BUDGET or len(self.previous) >= self.purge_at:
            self._drop_dead()
            self.purge_at = max(256, 2 * len(self.previous))
            if self.previous_size + size > LEAF_CHANGE_BUDGET:
                return
        value, gradient = _values(leaf), _values(grad)
        if value.dtype.kind != "f" or gradient.dtype.kind != "f":
            return
        now = (value.astype(np.float64).reshape(-1), gradient.astype(np.float64).reshape(-1))
        self.previous[leaf_id] = (weakref.ref(leaf), *now)
        self.previous_size += now[0].size
        if before is None or before[1].shape != now[0].shape:
            return
        grad_id = array_state(self.rec, grad)[1]
        rows = (
            (leaf_id, -1, NUM_LEAF_CHANGE, _difference(now[0], before[1])),
            (grad_id, leaf_id, NUM_GRAD_CHANGE, _difference(now[1], before[2])),
        )
        with self.lock:
            for array_id, owner, what, summary in rows:
                self.rows.extend((seq, array_id, owner, what, "", "", *summary))

    def _drop_dead(self) -> None:
        """Forget the copies of leaves that no longer exist (a loop that makes new parameters
        every step would otherwise fill the budget with them)."""
        for leaf_id, entry in list(self.previous.items()):
            if entry[0]() is None:
                del self.previous[leaf_id]
                self.previous_size -= entry[1].size

    # ---------------------------------------------------------------- end of run
    def finish(self) -> dict[str, Any]:
        """Write the remaining rows; check the custom adjoints (the wrappers are gone by now)."""
        self.flush()
        try:
            checks = check_custom_adjoints(self.custom)
        except Exception as exc:  # never break the end of the user's run
            self.rec.fail(exc)
            checks = []
        return {"adjoint_checks": checks}


def _resolve(args: Sequence[Any], index: int, path: tuple[str, ...] | None) -> Any:
    value = args[index] if index < len(args) else None
    for name in path or ():
        if value is None:
            break
        value = getattr(value, name, None)
    return value


def _alive(refs: dict[int, Any]) -> Iterator[Any]:
    for ref in list(refs.values()):
        value = ref()
        if value is not None:
            yield value


# -------------------------------------------------------------------- outer wrappers
class _Active:
    """The session's :class:`Numerics` (an attribute, not a module global: wrapper frames
    run with a copy of this module's globals, see ``wrap.common.in_place_of``)."""

    numerics: Numerics | None = None


current = _Active()


def _enter(rec: Recorder) -> bool:
    try:
        ts = rec.local.state
    except AttributeError:
        ts = rec.thread_state()
    return ts.guard == 0 and not rec.captures


def _guarded(rec: Recorder, function: Callable[[], None]) -> None:
    """Run a summary step with the guard up (its reads are not events); failures are logged."""
    ts = rec.thread_state()
    ts.guard += 1
    try:
        function()
    except Exception as exc:
        rec.fail(exc)
    finally:
        ts.guard -= 1


def _launch(original: Callable[..., Any], inner: Callable[..., Any]) -> Callable[..., Any]:
    names = tuple(inspect.signature(original).parameters)

    def launch(*args: Any, **kwargs: Any) -> Any:
        rec, numerics = state.rec, current.numerics
        if rec is None or numerics is None or not _enter(rec):
            return inner(*args, **kwargs)
        # The inner wrapper under the session lock: the seqs it took are exactly [first, stop).
        # Written out in each wrapper, not in a helper: Warp names "the user's line" by walking
        # past frames that look like its own (see wrap.common.in_place_of), and a helper's frame
        # in this file would stop the walk here (the overwrite warning of wp.copy named it).
        with rec.lock:
            first = rec.seq
            result = inner(*args, **kwargs)
            stop = rec.seq
        if stop == first + 1:

            def after() -> None:
                named = dict(zip(names, args))
                named.update(kwargs)
                if not named.get("record_cmd"):
                    numerics.after_launch(first, named)

            _guarded(rec, after)
        return result

    return mark(original, launch)


def _copy(original: Callable[..., Any], inner: Callable[..., Any]) -> Callable[..., Any]:
    def copy(*args: Any, **kwargs: Any) -> Any:
        rec, numerics = state.rec, current.numerics
        if rec is None or numerics is None or rec.captures:
            return inner(*args, **kwargs)
        with rec.lock:  # as in launch
            first = rec.seq
            result = inner(*args, **kwargs)
            stop = rec.seq
        if stop > first:
            dest = args[0] if args else kwargs.get("dest")
            src = args[1] if len(args) > 1 else kwargs.get("src")
            _guarded(rec, lambda: numerics.after_copy(first, dest, src))
        return result

    return mark(original, copy)


def _memset(original: Callable[..., Any], inner: Callable[..., Any]) -> Callable[..., Any]:
    def memset(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec, numerics = state.rec, current.numerics
        if rec is None or numerics is None or not _enter(rec):
            return inner(self, *args, **kwargs)
        with rec.lock:  # as in launch
            first = rec.seq
            result = inner(self, *args, **kwargs)
            stop = rec.seq
        if stop == first + 1:
            _guarded(rec, lambda: numerics.write(first, self))
        return result

    return mark(original, memset)


def _backward(original: Callable[..., Any], inner: Callable[..., Any]) -> Callable[..., Any]:
    def backward(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec, numerics = state.rec, current.numerics
        if rec is None or numerics is None or not _enter(rec):
            return inner(self, *args, **kwargs)
        with rec.lock:  # as in launch
            first = rec.seq
            result = inner(self, *args, **kwargs)
            stop = rec.seq
        if stop > first:
            loss = args[0] if args else kwargs.get("loss")
            _guarded(rec, lambda: numerics.after_backward(stop - 1, self, loss))
        return result

    return mark(original, backward)


_OUTER: dict[str, Callable[[Callable[..., Any], Callable[..., Any]], Callable[..., Any]]] = {
    "launch": _launch,  # module functions by name, methods by "Class.name"
    "copy": _copy,
    "array.zero_": _memset,
    "array.fill_": _memset,
    "noncontiguous_array_base.zero_": _memset,
    "Tape.backward": _backward,
}


def wrap_factory(name: str, factory: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``factory`` (an ordinary wrapper maker), with the numerics wrapper around its
    wrapper for the calls that have one; other factories are returned unchanged."""
    outer = _OUTER.get(name)
    if outer is None:
        return factory
    return lambda original: outer(original, factory(original))


__all__ = ["Numerics", "current", "summarize", "wrap_factory"]
