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

Facts are cached per kernel object (one per key, module and overload), so the
recorder's per-launch call is a dict lookup. Any internal failure yields facts marked
``failed: ...`` in which every array is conservatively read and stored.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import warp

from warptrace.kernel_source import FUNC, FUNC_GRAD, FUNC_REPLAY, KERNEL, FunctionSource, parse_function
from warptrace.kernel_source import build as build_source_model

try:  # Warp >= 1.10 keeps its implementation in warp._src
    from warp._src import codegen as _codegen
    from warp._src import context as _context
    from warp._src import types as _types
except ImportError:  # pragma: no cover - older layout
    from warp import codegen as _codegen  # type: ignore[no-redef]
    from warp import context as _context  # type: ignore[no-redef]
    from warp import types as _types  # type: ignore[no-redef]

__all__ = ["ArgFact", "KernelFacts", "kernel_facts"]


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

    def __post_init__(self) -> None:
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
# module and overload, so the object is the identity we need. Strong references keep
# ids from being reused.
_BY_KERNEL: dict[Any, KernelFacts] = {}
# Generic kernels: (kernel, cheap key of the argument types) and (kernel, signature).
_BY_GENERIC_ARGS: dict[Any, KernelFacts] = {}
_BY_SIGNATURE: dict[Any, KernelFacts] = {}
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
            cheap = (kernel, tuple(_cheap_type_key(a) for a in args))
            facts = _BY_GENERIC_ARGS.get(cheap)
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
        facts = _BY_SIGNATURE.get((kernel, sig))
        if facts is None:
            overload = kernel.overloads.get(sig) if sig is not None else None
            if overload is not None:
                facts = _BY_KERNEL.get(overload) or _analyse_or_fail(overload, None)
                _BY_KERNEL[overload] = facts
            else:
                # Not instantiated yet (facts asked before the launch): analyse the
                # template with the inferred types, without registering an overload.
                facts = _analyse_or_fail(kernel, arg_types)
            _BY_SIGNATURE[(kernel, sig)] = facts
        if cheap is not None:
            _BY_GENERIC_ARGS[cheap] = facts
        return facts


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


# ---------------------------------------------------------------- references and effects

ARR, STRUCT, ELEM, COPY = 0, 1, 2, 3

# (kind, root parameter index, field path, ndim for ARR, dtype/struct type)
Ref = tuple[int, int, tuple[str, ...], Optional[int], Any]

_EMPTY: frozenset = frozenset()
_READ, _STORE, _ACC = 0, 1, 2
_NO_LINE = -1

_ATOMICS = (
    "atomic_add", "atomic_sub", "atomic_min", "atomic_max", "atomic_cas", "atomic_exch",
    "atomic_and", "atomic_or", "atomic_xor",
)  # fmt: skip
# Builtins that write through an array parameter, by parameter name.
_BUILTIN_WRITES: dict[str, tuple[tuple[str, ...], int]] = {
    **{name: (("arr",), _ACC) for name in _ATOMICS},
    "tile_atomic_add": (("a",), _ACC),
    "tile_atomic_add_indexed": (("a",), _ACC),
    "tile_store": (("a",), _STORE),
    "tile_store_indexed": (("a",), _STORE),
    "array_store": (("arr",), _STORE),
    "dense_gemm": (("C",), _STORE),
    "dense_gemm_batched": (("C",), _STORE),
    "dense_chol": (("L",), _STORE),
    "dense_chol_batched": (("L",), _STORE),
    "dense_solve": (("x",), _STORE),
    "dense_solve_batched": (("x",), _STORE),
    "dense_subs": (("x",), _STORE),
}
# Builtins that take an array without touching its elements (size, null test, view).
_BUILTIN_NO_ACCESS = frozenset({"len", "where", "select", "view", "unot"})
# Builtins whose result may be one of their array arguments (or a view of it).
_BUILTIN_PASS_THROUGH = frozenset({"where", "select"})
# Attributes of an array that are metadata, not elements.
_STRUCT_TYPE = getattr(_codegen, "Struct", None)
_is_reference = getattr(_types, "is_reference", None)


def _is_struct_type(t: Any) -> bool:
    return _STRUCT_TYPE is not None and isinstance(t, _STRUCT_TYPE)


def _is_array_type(t: Any) -> bool:
    try:
        return bool(_types.is_array(t))
    except Exception:
        return False


def _is_ref_type(t: Any) -> bool:
    return _is_reference is not None and bool(_is_reference(t))


def _field_type(struct: Any, name: str) -> Any:
    var = getattr(struct, "vars", {}).get(name)
    return None if var is None else var.type


def _ref_for_type(root: int, path: tuple[str, ...], t: Any) -> Optional[Ref]:
    """The reference a value of type ``t`` at ``root.path`` denotes, or None for plain values."""
    if _is_array_type(t):
        return (ARR, root, path, getattr(t, "ndim", None), getattr(t, "dtype", None))
    if _is_struct_type(t):
        return (STRUCT, root, path, None, t)
    return None


class _Effects:
    """Per (root, path): first line of read, store, accumulate (-1 when absent)."""

    __slots__ = ("lines",)

    def __init__(self) -> None:
        self.lines: dict[tuple[int, tuple[str, ...]], list[int]] = {}

    def add(self, root: int, path: tuple[str, ...], what: int, line: int) -> bool:
        slot = self.lines.get((root, path))
        if slot is None:
            slot = self.lines[(root, path)] = [_NO_LINE, _NO_LINE, _NO_LINE]
        old = slot[what]
        if old == _NO_LINE or line < old:
            slot[what] = line
            return old == _NO_LINE
        return False


@dataclass
class _Summary:
    """What a call to a user function does, in terms of its parameters.

    ``custom_grad``/``custom_replay``/``native`` cover the whole call tree below it.
    """

    effects: _Effects
    returns: frozenset
    custom_grad: frozenset
    custom_replay: frozenset
    native: bool
    functions: frozenset  # every user Function object reached below it (callees, custom adjoints)


_EMPTY_SUMMARY = _Summary(_Effects(), frozenset(), frozenset(), frozenset(), False, frozenset())


class _Context:
    """State shared by the analysis of one kernel and all its callees."""

    def __init__(self) -> None:
        self.in_progress: set[Any] = set()


# Summaries of user functions, keyed by (Function object, parameter references).
# Shared by all kernels: a helper used by many kernels is walked once per type combination.
_SUMMARIES: dict[Any, _Summary] = {}


# ---------------------------------------------------------------- the walk


class _Walker:
    """Abstract interpretation of one function body over references (see module doc)."""

    def __init__(
        self,
        ctx: _Context,
        func: Any,
        tree: ast.FunctionDef,
        line_offset: int,
        env: dict[str, frozenset],
        ref_params: dict[str, int],
    ) -> None:
        self.ctx = ctx
        self.func = func
        self.tree = tree
        self.line_offset = line_offset
        self.env = dict(env)
        self.ref_params = ref_params
        self.effects = _Effects()
        self.returns: set = set()
        self.custom_grad: set[str] = set()
        self.custom_replay: set[str] = set()
        self.functions: set[Any] = set()  # user functions reached (for the kernel-source model)
        self.native = False
        self.changed = False
        self.locals = {a.arg for a in tree.args.args} | {
            n.id
            for n in ast.walk(tree)
            if isinstance(n, ast.Name) and isinstance(getattr(n, "ctx", None), ast.Store)
        }
        try:
            self.closure = _codegen.get_closure_vars(func)
        except Exception:
            self.closure = _closure_vars(func)
        self.globals = getattr(func, "__globals__", {})

    def run(self) -> None:
        # Flow-insensitive over local names: walk until no alias set grows (loops may
        # bind an alias after its use in source order).
        for _ in range(6):
            self.changed = False
            self.block(self.tree.body)
            if not self.changed:
                break

    def line(self, node: ast.AST) -> int:
        return getattr(node, "lineno", 1) + self.line_offset

    def effect(self, ref: Ref, what: int, node: ast.AST) -> None:
        self.effects.add(ref[1], ref[2], what, self.line(node))

    def bind(self, name: str, refs: frozenset) -> None:
        old = self.env.get(name, _EMPTY)
        if not refs <= old:
            self.env[name] = old | refs
            self.changed = True

    # ---------------------------------------------------------------- statements

    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.stmt(stmt)

    def stmt(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Assign):
            if (
                isinstance(node.value, (ast.Tuple, ast.List))
                and len(node.targets) == 1
                and isinstance(node.targets[0], (ast.Tuple, ast.List))
                and len(node.targets[0].elts) == len(node.value.elts)
            ):
                for target, value in zip(node.targets[0].elts, node.value.elts):
                    self.assign(target, self.val(value), node)
                return
            refs = self.val(node.value)
            for target in node.targets:
                self.assign(target, refs, node)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.assign(node.target, self.val(node.value), node)
        elif isinstance(node, ast.AugAssign):
            self.val(node.value)
            self.aug_assign(node)
        elif isinstance(node, ast.Expr):
            self.val(node.value)
        elif isinstance(node, ast.Return):
            if node.value is not None:
                refs = self.val(node.value)
                if not refs <= self.returns:
                    self.returns |= refs
        elif isinstance(node, (ast.If, ast.While)):
            self.val(node.test)
            self.block(node.body)
            self.block(node.orelse)
        elif isinstance(node, ast.For):
            self.assign(node.target, self.val(node.iter), node)
            self.block(node.body)
            self.block(node.orelse)
        elif isinstance(node, ast.With):
            for item in node.items:
                refs = self.val(item.context_expr)
                if item.optional_vars is not None:
                    self.assign(item.optional_vars, refs, node)
            self.block(node.body)
        elif isinstance(node, (ast.Pass, ast.Break, ast.Continue, ast.FunctionDef, ast.ClassDef)):
            return
        else:
            self.generic(node)

    def generic(self, node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                self.stmt(child)
            elif isinstance(child, ast.expr):
                self.val(child)

    def assign(self, target: ast.expr, refs: frozenset, stmt: ast.stmt) -> None:
        if isinstance(target, ast.Name):
            if target.id in self.ref_params:
                for ref in self.env.get(target.id, _EMPTY):
                    if ref[0] == ELEM:
                        self.effect(ref, _STORE, target)
            else:
                self.bind(target.id, refs)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.assign(elt, refs, stmt)
        elif isinstance(target, ast.Starred):
            self.assign(target.value, refs, stmt)
        elif isinstance(target, (ast.Subscript, ast.Attribute)):
            for ref in self.lv(target):
                # An element lvalue is a store; so is a (malformed) whole-row store x[i] = v
                # on a 2-d array. Rebinding a struct's array field is local to the copy.
                if ref[0] == ELEM or (ref[0] == ARR and isinstance(target, ast.Subscript)):
                    self.effect(ref, _STORE, target)
        else:
            self.val(target)

    def aug_assign(self, node: ast.AugAssign) -> None:
        accumulate = isinstance(node.op, (ast.Add, ast.Sub))
        target = node.target
        if isinstance(target, ast.Name):
            if target.id not in self.ref_params:
                return
            refs = [r for r in self.env.get(target.id, _EMPTY) if r[0] == ELEM]
        elif isinstance(target, (ast.Subscript, ast.Attribute)):
            refs = [
                r
                for r in self.lv(target)
                if r[0] == ELEM or (r[0] == ARR and isinstance(target, ast.Subscript))
            ]
        else:
            return
        for ref in refs:
            if accumulate:
                self.effect(ref, _ACC, target)
            else:  # x[i] *= v reads and overwrites: not an accumulation
                self.effect(ref, _READ, target)
                self.effect(ref, _STORE, target)

    # ---------------------------------------------------------------- expressions

    def val(self, node: ast.expr) -> frozenset:
        """Evaluate as a value: loading an element is a read and yields a copy."""
        refs = self.lv(node)
        if not any(r[0] == ELEM for r in refs):
            return refs
        out = set()
        for ref in refs:
            if ref[0] == ELEM:
                self.effect(ref, _READ, node)
                out.add((COPY, ref[1], ref[2], None, ref[4]))
            else:
                out.add(ref)
        return frozenset(out)

    def lv(self, node: ast.expr) -> frozenset:
        """Evaluate as an lvalue: the references ``node`` denotes, recording nested reads."""
        if isinstance(node, ast.Name):
            return self.env.get(node.id, _EMPTY)
        if isinstance(node, ast.Attribute):
            return self.attribute(self.lv(node.value), node.attr)
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.IfExp):
            self.val(node.test)
            return self.val(node.body) | self.val(node.orelse)
        if isinstance(node, (ast.Tuple, ast.List)):
            out: frozenset = _EMPTY
            for elt in node.elts:
                out |= self.val(elt)
            return out
        if isinstance(node, ast.Starred):
            return self.val(node.value)
        if isinstance(node, ast.Constant):
            return _EMPTY
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.val(child)
        return _EMPTY

    def attribute(self, base: frozenset, attr: str) -> frozenset:
        out = set()
        for kind, root, path, _ndim, dtype in base:
            if kind == STRUCT:
                ref = _ref_for_type(root, (*path, attr), _field_type(dtype, attr))
                if ref is not None:
                    out.add(ref)
            elif kind in (ELEM, COPY):
                ftype = _field_type(dtype, attr) if _is_struct_type(dtype) else None
                if _is_array_type(ftype):
                    # An array field of a struct stored in an array: memory we cannot
                    # follow, attributed to the outer array.
                    out.add((ARR, root, path, getattr(ftype, "ndim", None), getattr(ftype, "dtype", None)))
                else:
                    out.add((kind, root, path, None, ftype))
            # ARR attributes (shape, ndim, strides, ...) are metadata, not elements.
        return frozenset(out)

    def subscript(self, node: ast.Subscript) -> frozenset:
        base = self.lv(node.value)
        index = node.slice
        parts = index.elts if isinstance(index, ast.Tuple) else [index]
        count = 0
        has_slice = False
        for part in parts:
            if isinstance(part, ast.Slice):
                has_slice = True
                for bound in (part.lower, part.upper, part.step):
                    if bound is not None:
                        self.val(bound)
            else:
                count += 1
                self.val(part)
        out = set()
        for kind, root, path, ndim, dtype in base:
            if kind == ARR:
                if ndim is not None and (count < ndim or has_slice):
                    out.add((ARR, root, path, max(ndim - count, 1), dtype))
                else:
                    out.add((ELEM, root, path, None, dtype))
            elif kind in (ELEM, COPY):
                out.add((kind, root, path, None, None))
        return frozenset(out)

    # ---------------------------------------------------------------- calls

    def resolve(self, func_node: ast.expr) -> Any:
        """The object a call's callee expression names, resolved as Warp does, or None."""
        warp_func = getattr(func_node, "warp_func", None)  # wp.static() already resolved
        if warp_func is not None:
            return warp_func
        if isinstance(func_node, ast.Call):  # wp.static(expr)(...) left unresolved
            inner = self.resolve(func_node.func)
            if _is_static(inner) and func_node.args:
                return self.static_callee(func_node.args[0])
            return None
        path: list[str] = []
        node = func_node
        while isinstance(node, ast.Attribute):
            path.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        path.append(node.id)
        path.reverse()
        if path[0] in self.locals:
            return None
        if path[0] in self.closure:
            obj = self.closure[path[0]]
        else:
            obj = self.globals.get(path[0])
        if obj is None:
            obj = getattr(warp, path[0], None)
        if obj is None:
            obj = getattr(builtins, path[0], None)
        if obj is None:
            return _context.builtin_functions.get(path[0]) if len(path) == 1 else None
        for attr in path[1:]:
            nxt = getattr(obj, attr, None)
            if nxt is None and obj is warp:
                nxt = _context.builtin_functions.get(attr)
            if nxt is None:
                return None
            obj = nxt
        if not isinstance(obj, _context.Function) and len(path) == 1:
            # bare builtin names shadowed by Python builtins, e.g. min, max, abs, len
            name = getattr(obj, "__name__", None)
            if obj is getattr(builtins, path[0], None) and name in _context.builtin_functions:
                return _context.builtin_functions[name]
        return obj

    def static_callee(self, expr: ast.expr) -> Any:
        """The function ``wp.static(expr)`` names, as Warp evaluates it (globals and closure).

        When ``expr`` depends on a loop variable (``wp.static(funcs[k])``) it cannot be
        evaluated here: every function in the indexed container is a candidate.
        """
        scope = {**self.globals, **self.closure}
        try:
            return eval(compile(ast.Expression(expr), "<wp.static>", "eval"), scope)
        except Exception:
            pass
        candidates: list[Any] = []
        if isinstance(expr, ast.Subscript):
            with contextlib.suppress(Exception):
                container = eval(compile(ast.Expression(expr.value), "<wp.static>", "eval"), scope)
                values = container.values() if isinstance(container, dict) else container
                candidates = [f for f in values if isinstance(f, _context.Function)]
        return _Choice(tuple(candidates))

    def call(self, node: ast.Call) -> frozenset:
        callee = self.resolve(node.func)
        if _is_static(callee):
            return _EMPTY  # evaluated in Python at declaration time
        if not isinstance(node.func, (ast.Name, ast.Attribute)) and callee is None:
            self.val(node.func)
        args = [self.lv(a.value if isinstance(a, ast.Starred) else a) for a in node.args]
        kwargs = {k.arg: self.lv(k.value) for k in node.keywords if k.arg is not None}
        for k in node.keywords:
            if k.arg is None:
                self.val(k.value)
        callees = callee.candidates if isinstance(callee, _Choice) else (callee,)
        result: frozenset = _EMPTY
        for one in callees:
            if isinstance(one, _context.Function):
                if getattr(one, "func", None) is None:  # a builtin
                    result |= self.builtin_call(one, args, kwargs, node)
                else:
                    result |= self.user_call(one, args, kwargs, node)
        if callees and all(isinstance(one, _context.Function) for one in callees):
            return result
        # A type constructor, a Python builtin or something we cannot see into: any
        # array (or struct with arrays) handed to it is conservatively read; a user
        # function we could not resolve may also overwrite it.
        unresolved_user = isinstance(callee, _Choice) and not callees
        for refs in (*args, *kwargs.values()):
            for ref in refs:
                if ref[0] in (ELEM, ARR, STRUCT):
                    self.effect(ref, _READ, node)
                    if unresolved_user:
                        self.effect(ref, _STORE, node)
        return result

    def builtin_call(self, func: Any, args: list, kwargs: dict, node: ast.Call) -> frozenset:
        key = func.key
        names = _builtin_param_names(func, len(args))
        spec = _BUILTIN_WRITES.get(key)
        no_access = key in _BUILTIN_NO_ACCESS
        result: set = set()
        bound = [(names[i] if i < len(names) else None, refs) for i, refs in enumerate(args)]
        bound += list(kwargs.items())
        for position, (name, refs) in enumerate(bound):
            if spec is not None and (name in spec[0] or (name is None and position == 0)):
                for ref in refs:
                    if ref[0] in (ARR, ELEM, STRUCT):
                        self.effect(ref, spec[1], node)
                continue
            for ref in refs:
                if ref[0] == ELEM:
                    self.effect(ref, _READ, node)  # a value argument
                elif ref[0] in (ARR, STRUCT):
                    if key in _BUILTIN_PASS_THROUGH:
                        result.add(ref)
                    elif key == "view" and position == 0 and ref[0] == ARR:
                        ndim = ref[3]
                        view_ndim = None if ndim is None else max(ndim - (len(bound) - 1), 1)
                        result.add((ARR, ref[1], ref[2], view_ndim, ref[4]))
                    elif not no_access:
                        self.effect(ref, _READ, node)
        return frozenset(result)

    def user_call(self, func: Any, args: list, kwargs: dict, node: ast.Call) -> frozenset:
        result: set = set()
        candidates = _overloads(func)
        fitting = [f for f in candidates if _fits(f, len(args), kwargs)] or candidates
        for overload in fitting:
            self.note_custom(overload)
            params = [a.label for a in overload.adj.args]
            arg_types = overload.adj.arg_types
            bound: dict[int, frozenset] = {}
            for i, refs in enumerate(args):
                if i < len(params):
                    bound[i] = refs
            for name, refs in kwargs.items():
                if name in params:
                    bound[params.index(name)] = bound.get(params.index(name), _EMPTY) | refs
            if getattr(overload, "native_snippet", None) is not None:
                self.native = True
                # Native code: anything it can reach may be read or overwritten.
                for refs in bound.values():
                    for ref in refs:
                        if ref[0] in (ARR, STRUCT, ELEM):
                            self.effect(ref, _READ, node)
                            self.effect(ref, _STORE, node)
                continue
            callee_env: dict[int, frozenset] = {}
            for i, refs in bound.items():
                by_ref = _is_ref_type(arg_types.get(params[i]))
                callee_refs = set()
                for kind, root, path, ndim, dtype in refs:
                    if kind in (ARR, STRUCT):
                        callee_refs.add((kind, i, (), ndim, dtype))
                    elif by_ref and kind == ELEM:
                        callee_refs.add((ELEM, i, (), None, dtype))
                    else:
                        if kind == ELEM:  # passed by value: loaded here
                            self.effect((kind, root, path, ndim, dtype), _READ, node)
                        callee_refs.add((COPY, i, (), None, dtype))
                callee_env[i] = frozenset(callee_refs)
            summary = _summary(self.ctx, overload, callee_env)
            self.custom_grad |= summary.custom_grad
            self.custom_replay |= summary.custom_replay
            self.functions |= summary.functions
            self.native = self.native or summary.native
            for (param, subpath), lines in summary.effects.lines.items():
                for ref in bound.get(param, _EMPTY):
                    target = _map_path(ref, subpath)
                    for what in (_READ, _STORE, _ACC):
                        if lines[what] != _NO_LINE:
                            self.effects.add(target[0], target[1], what, self.line(node))
            for kind, param, subpath, ndim, dtype in summary.returns:
                for ref in bound.get(param, _EMPTY):
                    root, path = _map_path(ref, subpath)
                    mapped_kind = COPY if ref[0] in (ELEM, COPY) and kind != ARR else kind
                    result.add((mapped_kind, root, path, ndim, dtype))
        return frozenset(result)

    def note_custom(self, func: Any) -> None:
        self.functions.add(func)
        if getattr(func, "custom_grad_func", None) is not None:
            self.custom_grad.add(func.key)
        if getattr(func, "custom_replay_func", None) is not None:
            self.custom_replay.add(func.key)


@dataclass(frozen=True)
class _Choice:
    """Functions a call may reach when its callee is only known up to a container."""

    candidates: tuple[Any, ...]


def _map_path(ref: Ref, subpath: tuple[str, ...]) -> tuple[int, tuple[str, ...]]:
    """Where a callee's effect on ``param.subpath`` lands for the caller's ``ref``."""
    if ref[0] in (ARR, STRUCT):
        return ref[1], ref[2] + subpath
    return ref[1], ref[2]  # through an element copy: opaque, the outer array


def _is_static(obj: Any) -> bool:
    return (
        callable(obj)
        and getattr(obj, "__qualname__", None) == "static"
        and str(getattr(obj, "__module__", "")).startswith("warp")
    )


def _closure_vars(func: Any) -> dict[str, Any]:
    result = {}
    closure = getattr(func, "__closure__", None)
    if closure:
        for name, cell in zip(func.__code__.co_freevars, closure):
            with contextlib.suppress(ValueError):
                result[name] = cell.cell_contents
    return result


def _builtin_param_names(func: Any, nargs: int) -> list[str]:
    overloads = getattr(func, "overloads", None) or [func]
    for overload in overloads:
        names = list(getattr(overload, "input_types", {}).keys())
        if len(names) >= nargs:
            return names
    return list(getattr(func, "input_types", {}).keys())


def _overloads(func: Any) -> list[Any]:
    """Every body a call to ``func`` may run (Warp picks by type; we take the union)."""
    seen: dict[int, Any] = {id(func): func}
    for table in ("user_overloads", "user_templates"):
        for overload in (getattr(func, table, None) or {}).values():
            seen.setdefault(id(overload), overload)
    return [f for f in seen.values() if getattr(f, "adj", None) is not None]


def _fits(func: Any, nargs: int, kwargs: dict) -> bool:
    params = [a.label for a in func.adj.args]
    return nargs <= len(params) and all(k in params for k in kwargs)


def _summary(ctx: _Context, func: Any, env: dict[int, frozenset]) -> _Summary:
    key: Any = (func, tuple(sorted(env.items(), key=lambda item: item[0])))
    try:
        cached = _SUMMARIES.get(key)
    except TypeError:  # an unhashable dtype: analyse without caching
        key, cached = None, None
    if cached is not None:
        return cached
    if func in ctx.in_progress:  # recursion (not valid Warp anyway)
        return _EMPTY_SUMMARY
    ctx.in_progress.add(func)
    try:
        adj = func.adj
        params = [a.label for a in adj.args]
        names_env = {name: env.get(i, _EMPTY) for i, name in enumerate(params)}
        ref_params = {name: i for i, name in enumerate(params) if _is_ref_type(adj.arg_types.get(name))}
        walker = _Walker(ctx, adj.func, _function_def(adj), 0, names_env, ref_params)
        walker.run()
    finally:
        ctx.in_progress.discard(func)
    summary = _Summary(
        walker.effects,
        frozenset(walker.returns),
        frozenset(walker.custom_grad),
        frozenset(walker.custom_replay),
        walker.native,
        frozenset(walker.functions),
    )
    if key is not None:
        _SUMMARIES[key] = summary
    return summary


def _function_def(adj: Any) -> ast.FunctionDef:
    tree = getattr(adj, "tree", None)
    if tree is None:
        parsed = parse_function(str(getattr(adj, "source", "") or ""))
        if parsed is None:
            raise ValueError("source does not parse to a function definition")
        return parsed
    node = tree.body[0]
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise ValueError("source does not start with a function definition")
    return node  # type: ignore[return-value]


# ---------------------------------------------------------------- kernel level


def _analyse(kernel: Any, arg_types: Optional[list[Any]]) -> KernelFacts:
    adj = kernel.adj
    names = [a.label for a in adj.args]
    types = list(arg_types) if arg_types is not None else [a.type for a in adj.args]
    tree = _function_def(adj)
    offset = int(getattr(adj, "fun_lineno", 0) or 0) - 1
    env: dict[str, frozenset] = {}
    for i, (name, t) in enumerate(zip(names, types)):
        ref = _ref_for_type(i, (), t)
        env[name] = frozenset((ref,)) if ref is not None else _EMPTY
    ctx = _Context()
    walker = _Walker(ctx, adj.func, tree, offset, env, {})
    walker.run()
    rows = _rows(names, types)
    facts_rows = _apply(rows, walker.effects)
    return _make_facts(
        kernel,
        analysis="ast",
        args=facts_rows,
        custom_grad=tuple(sorted(walker.custom_grad)),
        custom_replay=tuple(sorted(walker.custom_replay)),
        native=walker.native,
        source_model=_source_model(kernel, walker.functions),
    )


def _function_source(func: Any, role: str, of: str = "") -> FunctionSource:
    adj = func.adj
    line = -1
    with contextlib.suppress(Exception):
        line = int(adj.fun_lineno) + _function_def(adj).lineno - 1
    name = str(getattr(getattr(adj, "func", None), "__name__", "") or func.key) if of else str(func.key)
    return FunctionSource(role, name, _source_file(func), line, str(getattr(adj, "source", "") or ""), of)


def _source_model(kernel: Any, functions: set[Any]) -> str:
    """The kernel-source model of ``kernel`` and the user functions its walk reached, as JSON."""
    try:
        sources = []
        for func in sorted(functions, key=lambda f: (str(f.key), id(f))):
            if getattr(func, "native_snippet", None) is not None:
                continue
            sources.append(_function_source(func, FUNC))
            grad = getattr(func, "custom_grad_func", None)
            if getattr(grad, "adj", None) is not None:
                sources.append(_function_source(grad, FUNC_GRAD, str(func.key)))
            replay = getattr(func, "custom_replay_func", None)
            if getattr(replay, "adj", None) is not None:
                sources.append(_function_source(replay, FUNC_REPLAY, str(func.key)))
        model = build_source_model(_function_source(kernel, KERNEL), tuple(sources))
        return model.to_json()
    except Exception:  # the facts stay usable; the analyzer rebuilds the model from the source
        return ""


# (index, name, type string, field path, is_array)
_Row = tuple[int, str, str, tuple[str, ...], bool]


def _rows(names: list[str], types: list[Any]) -> list[_Row]:
    rows: list[_Row] = []
    for index, (name, t) in enumerate(zip(names, types)):
        rows.append((index, name, _type_name(t), (), _is_array_type(t)))
        if _is_struct_type(t):
            _field_rows(rows, index, name, t, (), set())
    return rows


def _field_rows(rows: list[_Row], index: int, name: str, struct: Any, prefix: tuple, seen: set) -> None:
    if id(struct) in seen:
        return
    seen = seen | {id(struct)}
    for field_name, var in getattr(struct, "vars", {}).items():
        path = (*prefix, field_name)
        if _is_array_type(var.type):
            rows.append((index, name, _type_name(var.type), path, True))
        elif _is_struct_type(var.type):
            _field_rows(rows, index, name, var.type, path, seen)


def _apply(rows: list[_Row], effects: _Effects) -> tuple[ArgFact, ...]:
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
            slot = lines.setdefault(target, [_NO_LINE, _NO_LINE, _NO_LINE])
            for what in (_READ, _STORE, _ACC):
                line = found[what]
                if line != _NO_LINE and (slot[what] == _NO_LINE or line < slot[what]):
                    slot[what] = line
    facts = []
    for index, name, type_name, path, is_array in rows:
        read_line, store_line, acc_line = lines.get((index, path), (_NO_LINE, _NO_LINE, _NO_LINE))
        writes = [x for x in (store_line, acc_line) if x != _NO_LINE]
        facts.append(
            ArgFact(
                index=index,
                name=name,
                type=type_name,
                field=".".join(path),
                is_array=is_array,
                read=read_line != _NO_LINE,
                write=bool(writes),
                store=store_line != _NO_LINE,
                accumulate=acc_line != _NO_LINE,
                write_line=min(writes) if writes else _NO_LINE,
                read_line=read_line,
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
    adj = getattr(kernel, "adj", None)
    source = str(getattr(adj, "source", "") or "")
    line = -1
    with contextlib.suppress(Exception):
        line = int(adj.fun_lineno) + _function_def(adj).lineno - 1
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
    func = getattr(kernel, "func", None)
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
    if _is_array_type(t):
        family = type(t).__name__
        with contextlib.suppress(Exception):  # annotation classes differ by version; the repr does not
            family = str(_types.type_repr(t)).split("(", 1)[0]
        return f"{family}(dtype={_type_name(getattr(t, 'dtype', None))}, ndim={getattr(t, 'ndim', '?')})"
    if _is_struct_type(t):
        cls = getattr(t, "cls", None)
        return str(getattr(cls, "__name__", None) or t.key)
    if t is Any:
        return "Any"
    try:
        return str(_types.type_repr(t))
    except Exception:
        return str(getattr(t, "__name__", t))
