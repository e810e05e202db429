"""Which arguments a Warp kernel reads and writes, computed from its source.

The recorder needs, for every launched kernel, the arrays it reads, the arrays it
overwrites (plain stores) and the arrays it only accumulates into (``+=``,
``atomic_*``), down to struct fields (``state.q``) and including the writes made in
``@wp.func`` callees. The analysis rules build on these facts, so they must be right
even where the caller's ``inputs=``/``outputs=`` lists are wrong.

Warp can compute similar flags itself (``wp.config.verify_autograd_array_access``) but
that flag changes the module hash, forces a native recompile of every module in every
process, and its flags miss reads in the left operand of binary operations, tile
loads/stores, writes through ``wp.ref`` parameters and struct fields. So we never
turn it on. Instead this module walks the kernel's parsed AST (``kernel.adj.tree``),
resolving called names the way Warp does (closure, then globals, then the ``warp``
namespace, then builtins) and recursing into user functions with the caller's
argument types, so that a callee's effects on its parameters map back to the
caller's argument and struct field path. The walk is pure Python: it compiles
nothing, launches nothing and leaves the module hash untouched, and it works the same
on every Warp version since it reads only the syntax tree and a few stable attributes.

The abstract values tracked for every local name are *references*: what memory a
name may denote, rooted at a parameter of the function being analysed:

- ``ARR``: an array (or a view of one) at ``root.path``;
- ``STRUCT``: a struct value at ``root.path`` whose array fields are shared memory;
- ``ELEM``: an addressable element of an array (an lvalue), or a ``wp.ref`` parameter;
- ``COPY``: a value copied out of an array element; writing to it is local, but an
  array field of a copied struct element still points at device memory we cannot
  follow, so accesses through it are attributed to the outer array (opaque).

The walk itself lives in :mod:`warptrace.record.kernel_walk` (over the abstract values of
:mod:`warptrace.record.kernel_refs`); this module caches, runs it per kernel, maps its
effects to argument rows, and gathers the sources of the kernel and of the functions the
walk reached for the kernel-source model (:mod:`warptrace.kernel_source`), stored with the
facts. Facts are cached per kernel object (one per key, module and overload), so the
recorder's per-launch call is a dict lookup. Any internal failure yields facts marked
``failed: ...`` in which every array is conservatively read and stored.
"""

from __future__ import annotations

import ast
import contextlib
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Optional

import warp

try:  # Warp >= 1.10 keeps its implementation in warp._src
    from warp._src import types as _types
except ImportError:  # pragma: no cover - older layout
    from warp import types as _types  # type: ignore[no-redef]

from warptrace.kernel_source import FUNC, FUNC_GRAD, FUNC_REPLAY, KERNEL, FunctionSource
from warptrace.kernel_source.model import inputs_json
from warptrace.record.kernel_handles import HandleUse, handle_uses
from warptrace.record.kernel_refs import (
    EFFECTS,
    EMPTY,
    NO_LINE,
    Effects,
    WalkContext,
    is_array_type,
    is_struct_type,
    ref_for_type,
)
from warptrace.record.kernel_walk import Walker, function_def

# Kernel argument types that can hold a wp.Mesh / wp.Bvh / wp.Volume id
_ID_TYPES = tuple(t for t in (getattr(warp, "uint64", None), getattr(warp, "int64", None)) if t is not None)

__all__ = ["ArgFact", "KernelFacts", "kernel_facts", "refresh_enable_backward"]


@dataclass(frozen=True)
class ArgFact:
    """What one kernel argument (or one array field of a struct argument) undergoes."""

    index: int  # argument position
    name: str  # argument name
    type: str  # readable type, e.g. "array(dtype=float32, ndim=1)", "State", "float32"
    field: str  # struct field path below the argument: "" for the argument itself
    is_array: bool
    read: bool  # an element is loaded (a read inside a builtin call counts)
    write: bool  # store or accumulate
    store: bool  # a plain overwrite: x[i] = v, x[i].y = v, x[i] *= v, tile_store, wp.ref store
    accumulate: bool  # x[i] += v, x[i] -= v, wp.atomic_*, tile_atomic_add
    write_line: int  # absolute source line of the first write, -1
    read_line: int  # absolute source line of the first read, -1
    # Native code (``@wp.func_native``) reached it: what it reads or stores there is not
    # visible, so read/store are a conservative guess (the recorder flags the accesses
    # FLAG_UNCERTAIN; no rule makes an error of them). Not a trace column.
    opaque: bool = False


@dataclass(frozen=True)
class KernelFacts:
    """Read/write facts of one kernel overload; ``args`` has one row per argument and array field."""

    key: str
    module: str
    file: str
    line: int  # line of the `def`
    source: str
    enable_backward: bool
    custom_grad: tuple[str, ...]
    custom_replay: tuple[str, ...]
    native_snippets: bool
    analysis: str  # "ast" or "failed: <reason>"
    # The kernel-source model (warptrace.kernel_source.KernelSource) as JSON: the kernel,
    # the @wp.func callees and custom adjoints it reaches; "" when it could not be built.
    source_model: str
    args: tuple[ArgFact, ...]

    # Set in __post_init__ (per instance); declared here for the type checker only.
    _by_index: ClassVar[dict[int, tuple[ArgFact, ...]]]
    # The arrays it reaches through wp.Mesh / wp.Bvh / wp.Volume id arguments
    # (warptrace.record.kernel_handles); set by the analysis, () by default. Not a trace column.
    handles: ClassVar[tuple[HandleUse, ...]]

    def __post_init__(self) -> None:
        object.__setattr__(self, "handles", ())
        # Precomputed for the recorder's per-launch lookups; an attribute, not a
        # dataclass field, so fields()/asdict() show exactly the trace columns.
        by_index: dict[int, list[ArgFact]] = {}
        for fact in self.args:
            by_index.setdefault(fact.index, []).append(fact)
        object.__setattr__(self, "_by_index", {i: tuple(rows) for i, rows in by_index.items()})

    def arg_facts(self, index: int) -> tuple[ArgFact, ...]:
        """Rows of argument ``index``: its own row, then one per array field of a struct."""
        return self._by_index.get(index, ())


# ---------------------------------------------------------------- cache and entry point

# Keyed by the (non-generic) kernel object: Warp makes a new Kernel object per key,
# module and overload, so the object is the identity we need. Weak keys: a cached kernel
# must not outlive the program's own references, since Warp's module hash covers every
# live kernel object of the module (``Module._live_kernels``, a WeakSet): a kernel kept
# alive here after ``importlib.reload`` replaced it would keep the old source in the
# hash (warp.tests.aot.test_module_aot ``test_enable_hashing`` failed traced only).
_BY_KERNEL: weakref.WeakKeyDictionary[Any, KernelFacts] = weakref.WeakKeyDictionary()
# Generic kernels: kernel -> {cheap key of the argument types: facts} and kernel ->
# {signature: facts}.
_BY_GENERIC_ARGS: weakref.WeakKeyDictionary[Any, dict[Any, KernelFacts]] = weakref.WeakKeyDictionary()
_BY_SIGNATURE: weakref.WeakKeyDictionary[Any, dict[Any, KernelFacts]] = weakref.WeakKeyDictionary()
_LOCK = threading.RLock()


def kernel_facts(kernel: Any, args: Optional[Sequence[Any]] = None) -> KernelFacts:
    """Facts of ``kernel`` as launched with ``args`` (needed only for generic kernels).

    Cached: for a non-generic kernel the second call is one dict lookup. Never raises.
    """
    try:
        facts = _BY_KERNEL.get(kernel)
    except TypeError:  # not a kernel at all
        facts = None
    if facts is not None:
        return facts
    try:
        return _kernel_facts_slow(kernel, args)
    except Exception as error:
        return _failed_facts(kernel, None, f"{type(error).__name__}: {error}")


def _kernel_facts_slow(kernel: Any, args: Optional[Sequence[Any]]) -> KernelFacts:
    if not getattr(kernel, "is_generic", False):
        with _LOCK:
            facts = _BY_KERNEL.get(kernel)
            if facts is None:
                facts = _analyse_or_fail(kernel, None)
                with contextlib.suppress(TypeError):
                    _BY_KERNEL[kernel] = facts
            return facts

    cheap = None
    if args is not None:
        with contextlib.suppress(Exception):
            cheap = tuple(_cheap_type_key(a) for a in args)
            facts = _BY_GENERIC_ARGS.get(kernel, {}).get(cheap)
            if facts is not None:
                return facts
    with _LOCK:
        arg_types = None
        sig: Any = None
        if args is not None:
            try:
                arg_types = list(kernel.infer_argument_types(list(args)))
                sig = _types.get_signature(arg_types, func_name=kernel.key)
            except Exception:
                arg_types = None
        by_signature = _BY_SIGNATURE.setdefault(kernel, {})
        facts = by_signature.get(sig)
        if facts is None:
            overload = kernel.overloads.get(sig) if sig is not None else None
            if overload is not None:
                facts = _BY_KERNEL.get(overload) or _analyse_or_fail(overload, None)
                _BY_KERNEL[overload] = facts
            else:
                # Not instantiated yet (facts asked before the launch): analyse the
                # template with the inferred types, without registering an overload.
                facts = _analyse_or_fail(kernel, arg_types)
            by_signature[sig] = facts
        if cheap is not None:
            with contextlib.suppress(TypeError):
                _BY_GENERIC_ARGS.setdefault(kernel, {})[cheap] = facts
        return facts


def refresh_enable_backward(module: Any) -> set[Any]:
    """``module``'s options changed (``wp.set_module_options``): the cached facts of its
    kernels whose ``enable_backward`` is not what the options give now are replaced by
    copies with the new value (new facts, so a new ``kernels`` row from the next launch
    on: launches before the change keep the old row). Returns the kernels (generic
    templates and overloads) whose facts changed."""
    changed: set[Any] = set()
    with _LOCK:
        renewed: dict[int, KernelFacts] = {}  # one new object per old one: caches share facts

        def renew(kernel: Any, facts: KernelFacts) -> KernelFacts | None:
            if getattr(kernel, "module", None) is not module:
                return None
            now = _enable_backward(kernel)
            if now == facts.enable_backward:
                return None
            new = renewed.get(id(facts))
            if new is None:
                new = renewed[id(facts)] = replace(facts, enable_backward=now)
                object.__setattr__(new, "handles", facts.handles)
            changed.add(kernel)
            return new

        for kernel, facts in list(_BY_KERNEL.items()):
            new = renew(kernel, facts)
            if new is not None:
                _BY_KERNEL[kernel] = new
        for cache in (_BY_SIGNATURE, _BY_GENERIC_ARGS):
            for kernel, by_key in list(cache.items()):
                for key, facts in list(by_key.items()):
                    new = renew(kernel, facts)
                    if new is not None:
                        by_key[key] = new
    return changed


def _cheap_type_key(value: Any) -> Any:
    # Everything infer_argument_types looks at: the Python type, and for arrays and
    # structs the dtype, ndim and struct class.
    return (
        type(value),
        getattr(value, "dtype", None),
        getattr(value, "ndim", None),
        getattr(value, "_cls", None),
    )


def _analyse_or_fail(kernel: Any, arg_types: Optional[list[Any]]) -> KernelFacts:
    try:
        return _analyse(kernel, arg_types)
    except Exception as error:  # the recorder must never fail because of us
        return _failed_facts(kernel, arg_types, f"{type(error).__name__}: {error}")


# ---------------------------------------------------------------- kernel level


def _analyse(kernel: Any, arg_types: Optional[list[Any]]) -> KernelFacts:
    adj = kernel.adj
    names = [a.label for a in adj.args]
    types = list(arg_types) if arg_types is not None else [a.type for a in adj.args]
    tree = function_def(adj)
    offset = _first_line(adj) - 1
    env: dict[str, frozenset] = {}
    for i, (name, t) in enumerate(zip(names, types)):
        ref = ref_for_type(i, (), t)
        env[name] = frozenset((ref,)) if ref is not None else EMPTY
    ctx = WalkContext()
    walker = Walker(ctx, adj.func, tree, offset, env, {})
    walker.run()
    rows = _rows(names, types)
    facts_rows = _apply(rows, walker.effects)
    facts = _make_facts(
        kernel,
        analysis="ast",
        args=facts_rows,
        custom_grad=tuple(sorted(walker.custom_grad)),
        custom_replay=tuple(sorted(walker.custom_replay)),
        native=walker.native,
        source_model=_source_model(kernel, walker.functions),
    )
    ids = {name: i for i, (name, t) in enumerate(zip(names, types)) if t in _ID_TYPES}
    if ids:  # a mesh, BVH or volume id: the arrays behind it
        with contextlib.suppress(Exception):

            def walker_of(func: Any, body: ast.FunctionDef) -> Walker:
                return Walker(WalkContext(), func, body, 0, {}, {})

            object.__setattr__(facts, "handles", handle_uses(walker_of, adj.func, tree, ids, names))
    return facts


def _first_line(adj: Any) -> int:
    """Absolute line of the first line of ``adj.source`` (the decorator): the Python function's
    own first line. An overload of a generic kernel or function is built from the template's
    source, and its ``fun_lineno`` is 0, not a line of the file."""
    code = getattr(getattr(adj, "func", None), "__code__", None)
    if code is not None:
        return int(code.co_firstlineno)
    return int(getattr(adj, "fun_lineno", 0) or 0)


def _function_source(func: Any, role: str, of: str = "", max_unroll: int = 16) -> FunctionSource:
    adj = func.adj
    line = -1
    with contextlib.suppress(Exception):
        line = _first_line(adj) + function_def(adj).lineno - 1
    name = str(getattr(getattr(adj, "func", None), "__name__", "") or func.key) if of else str(func.key)
    return FunctionSource(
        role,
        name,
        _source_file(func),
        line,
        str(getattr(adj, "source", "") or ""),
        of,
        _integer_constants(getattr(adj, "func", None)),
        max_unroll,
    )


def _integer_constants(function: Any) -> tuple[tuple[str, int], ...]:
    """Integer values of the global and closure names ``function`` refers to: Warp evaluates
    them (``range(N)`` with ``N = wp.constant(8)``) when it decides to unroll a loop."""
    code = getattr(function, "__code__", None)
    if code is None:
        return ()
    values: dict[str, Any] = {}
    scope = getattr(function, "__globals__", {}) or {}
    for name in code.co_names:
        if name in scope:
            values[name] = scope[name]
    for name, cell in zip(code.co_freevars, getattr(function, "__closure__", None) or ()):
        with contextlib.suppress(ValueError):  # empty cell
            values[name] = cell.cell_contents
    return tuple(sorted((name, int(value)) for name, value in values.items() if type(value) is int))


def _max_unroll(kernel: Any) -> int:
    options = getattr(getattr(kernel, "module", None), "options", None) or {}
    try:
        return int(options.get("max_unroll", getattr(warp.config, "max_unroll", 16)))
    except (TypeError, ValueError):
        return 16


def _source_model(kernel: Any, functions: set[Any]) -> str:
    """The sources of the kernel-source model of ``kernel`` and the user functions its walk
    reached, as JSON (the analyzer builds the model: ``KernelSource.from_json``)."""
    try:
        sources = []
        unroll = _max_unroll(kernel)
        for func in sorted(functions, key=lambda f: (str(f.key), id(f))):
            if getattr(func, "native_snippet", None) is not None:
                continue
            sources.append(_function_source(func, FUNC, max_unroll=unroll))
            grad = getattr(func, "custom_grad_func", None)
            if getattr(grad, "adj", None) is not None:
                sources.append(_function_source(grad, FUNC_GRAD, str(func.key), unroll))
            replay = getattr(func, "custom_replay_func", None)
            if getattr(replay, "adj", None) is not None:
                sources.append(_function_source(replay, FUNC_REPLAY, str(func.key), unroll))
        # A generic @wp.func reached once as its template and once as an overload Warp built
        # while compiling the module (only when this process compiled it) has one source: keep
        # each source once, in an order that does not depend on object ids.
        unique = sorted(set(sources), key=lambda f: (f.name, f.role, f.of, f.file, f.line, f.source))
        return inputs_json(_function_source(kernel, KERNEL, max_unroll=unroll), tuple(unique))
    except Exception:  # the facts stay usable; the analyzer rebuilds the model from the source
        return ""


# (index, name, type string, field path, is_array)
_Row = tuple[int, str, str, tuple[str, ...], bool]


def _rows(names: list[str], types: list[Any]) -> list[_Row]:
    rows: list[_Row] = []
    for index, (name, t) in enumerate(zip(names, types)):
        rows.append((index, name, _type_name(t), (), is_array_type(t)))
        if is_struct_type(t):
            _field_rows(rows, index, name, t, (), set())
    return rows


def _field_rows(rows: list[_Row], index: int, name: str, struct: Any, prefix: tuple, seen: set) -> None:
    if id(struct) in seen:
        return
    seen = seen | {id(struct)}
    for field_name, var in getattr(struct, "vars", {}).items():
        path = (*prefix, field_name)
        if is_array_type(var.type):
            rows.append((index, name, _type_name(var.type), path, True))
        elif is_struct_type(var.type):
            _field_rows(rows, index, name, var.type, path, seen)


def _apply(rows: list[_Row], effects: Effects) -> tuple[ArgFact, ...]:
    lines: dict[tuple[int, tuple[str, ...]], list[int]] = {}
    array_rows = {(r[0], r[3]) for r in rows if r[4]}
    for (root, path), found in effects.lines.items():
        targets = []
        if (root, path) in array_rows:
            targets = [(root, path)]
        else:
            below = [k for k in array_rows if k[0] == root and k[1][: len(path)] == path]
            if below:  # the whole struct (or a sub-struct) was handed over
                targets = below
            else:  # deeper than any row: opaque memory below an array
                above = [k for k in array_rows if k[0] == root and path[: len(k[1])] == k[1]]
                if above:
                    targets = [max(above, key=lambda k: len(k[1]))]
        for target in targets:
            slot = lines.setdefault(target, [NO_LINE, NO_LINE, NO_LINE, NO_LINE])
            for what in EFFECTS:
                line = found[what]
                if line != NO_LINE and (slot[what] == NO_LINE or line < slot[what]):
                    slot[what] = line
    facts = []
    for index, name, type_name, path, is_array in rows:
        read_line, store_line, acc_line, opaque_line = lines.get((index, path), (NO_LINE,) * 4)
        writes = [x for x in (store_line, acc_line) if x != NO_LINE]
        facts.append(
            ArgFact(
                index=index,
                name=name,
                type=type_name,
                field=".".join(path),
                is_array=is_array,
                read=read_line != NO_LINE,
                write=bool(writes),
                store=store_line != NO_LINE,
                accumulate=acc_line != NO_LINE,
                write_line=min(writes) if writes else NO_LINE,
                read_line=read_line,
                opaque=opaque_line != NO_LINE,
            )
        )
    return tuple(facts)


def _failed_facts(kernel: Any, arg_types: Optional[list[Any]], reason: str) -> KernelFacts:
    rows: list[_Row] = []
    with contextlib.suppress(Exception):
        names = [a.label for a in kernel.adj.args]
        types = list(arg_types) if arg_types is not None else [a.type for a in kernel.adj.args]
        rows = _rows(names, types)
    args = tuple(
        ArgFact(index, name, type_name, ".".join(path), is_array, is_array, is_array, is_array, False, -1, -1)
        for index, name, type_name, path, is_array in rows
    )
    try:
        return _make_facts(kernel, analysis=f"failed: {reason}", args=args)
    except Exception:
        return KernelFacts(
            key=str(getattr(kernel, "key", "?")),
            module="",
            file="",
            line=-1,
            source="",
            enable_backward=True,
            custom_grad=(),
            custom_replay=(),
            native_snippets=False,
            analysis=f"failed: {reason}",
            source_model="",
            args=args,
        )


def _make_facts(
    kernel: Any,
    *,
    analysis: str,
    args: tuple[ArgFact, ...],
    custom_grad: tuple[str, ...] = (),
    custom_replay: tuple[str, ...] = (),
    native: bool = False,
    source_model: str = "",
) -> KernelFacts:
    adj: Any = getattr(kernel, "adj", None)
    source = str(getattr(adj, "source", "") or "")
    line = -1
    with contextlib.suppress(Exception):
        line = _first_line(adj) + function_def(adj).lineno - 1
    module = getattr(kernel, "module", None)
    return KernelFacts(
        key=str(kernel.key),
        module=str(getattr(module, "name", "") or ""),
        file=_source_file(kernel),
        line=line,
        source=source,
        enable_backward=_enable_backward(kernel),
        custom_grad=custom_grad,
        custom_replay=custom_replay,
        native_snippets=native,
        analysis=analysis,
        args=args,
        source_model=source_model,
    )


def _source_file(kernel: Any) -> str:
    filename = getattr(getattr(kernel, "adj", None), "filename", None)
    if filename and filename != "unknown source file":
        return str(filename)
    func: Any = getattr(kernel, "func", None)
    with contextlib.suppress(Exception):
        while hasattr(func, "__wrapped__"):
            func = func.__wrapped__
        return str(func.__code__.co_filename)
    return ""


def _enable_backward(kernel: Any) -> bool:
    options = getattr(kernel, "options", None) or {}
    if options.get("enable_backward") is not None:
        return bool(options["enable_backward"])
    module_options = getattr(getattr(kernel, "module", None), "options", None) or {}
    if module_options.get("enable_backward") is not None:
        return bool(module_options["enable_backward"])
    return bool(warp.config.enable_backward)


def _type_name(t: Any) -> str:
    if is_array_type(t):
        family = type(t).__name__
        with contextlib.suppress(Exception):  # annotation classes differ by version; the repr does not
            family = str(_types.type_repr(t)).split("(", 1)[0]
        return f"{family}(dtype={_type_name(getattr(t, 'dtype', None))}, ndim={getattr(t, 'ndim', '?')})"
    if is_struct_type(t):
        cls = getattr(t, "cls", None)
        return str(getattr(cls, "__name__", None) or t.key)
    if t is Any:
        return "Any"
    try:
        return str(_types.type_repr(t))
    except Exception:
        return str(getattr(t, "__name__", t))
