"""The walk: abstract interpretation of a kernel or ``@wp.func`` body over references (see
:mod:`warptrace.record.kernels` for what it computes and :mod:`warptrace.record.kernel_refs`
for the abstract values), with summaries of user functions cached per argument references."""

from __future__ import annotations

import ast
import builtins
import contextlib
from typing import Any

import warp

try:  # Warp >= 1.10 keeps its implementation in warp._src
    from warp._src import codegen as _codegen
    from warp._src import context as _context
except ImportError:  # pragma: no cover - older layout
    from warp import codegen as _codegen  # type: ignore[no-redef,attr-defined]
    from warp import context as _context  # type: ignore[no-redef,attr-defined]

from warptrace.kernel_source import parse_function
from warptrace.record.kernel_refs import (
    ACC,
    ARR,
    BUILTIN_NO_ACCESS,
    BUILTIN_PASS_THROUGH,
    BUILTIN_WRITES,
    COPY,
    EFFECTS,
    ELEM,
    EMPTY,
    EMPTY_SUMMARY,
    NO_LINE,
    OPAQUE,
    READ,
    STORE,
    STRUCT,
    SUMMARIES,
    Choice,
    Effects,
    Ref,
    Summary,
    WalkContext,
    builtin_param_names,
    callable_overloads,
    closure_vars,
    fits_call,
    is_array_type,
    is_ref_type,
    is_static_call,
    is_struct_type,
    map_path,
    ref_for_type,
    struct_field_type,
)

# ---------------------------------------------------------------- the walk


class Walker:
    """Abstract interpretation of one function body over references (see module doc)."""

    def __init__(
        self,
        ctx: WalkContext,
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
        self.effects = Effects()
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
            self.closure = closure_vars(func)
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
        old = self.env.get(name, EMPTY)
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
                for ref in self.env.get(target.id, EMPTY):
                    if ref[0] == ELEM:
                        self.effect(ref, STORE, target)
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
                    self.effect(ref, STORE, target)
        else:
            self.val(target)

    def aug_assign(self, node: ast.AugAssign) -> None:
        accumulate = isinstance(node.op, (ast.Add, ast.Sub))
        target = node.target
        if isinstance(target, ast.Name):
            if target.id not in self.ref_params:
                return
            refs = [r for r in self.env.get(target.id, EMPTY) if r[0] == ELEM]
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
                self.effect(ref, ACC, target)
            else:  # x[i] *= v reads and overwrites: not an accumulation
                self.effect(ref, READ, target)
                self.effect(ref, STORE, target)

    # ---------------------------------------------------------------- expressions

    def val(self, node: ast.expr) -> frozenset:
        """Evaluate as a value: loading an element is a read and yields a copy."""
        refs = self.lv(node)
        if not any(r[0] == ELEM for r in refs):
            return refs
        out = set()
        for ref in refs:
            if ref[0] == ELEM:
                self.effect(ref, READ, node)
                out.add((COPY, ref[1], ref[2], None, ref[4]))
            else:
                out.add(ref)
        return frozenset(out)

    def lv(self, node: ast.expr) -> frozenset:
        """Evaluate as an lvalue: the references ``node`` denotes, recording nested reads."""
        if isinstance(node, ast.Name):
            return self.env.get(node.id, EMPTY)
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
            out: frozenset = EMPTY
            for elt in node.elts:
                out |= self.val(elt)
            return out
        if isinstance(node, ast.Starred):
            return self.val(node.value)
        if isinstance(node, ast.Constant):
            return EMPTY
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.val(child)
        return EMPTY

    def attribute(self, base: frozenset, attr: str) -> frozenset:
        out = set()
        for kind, root, path, _ndim, dtype in base:
            if kind == STRUCT:
                ref = ref_for_type(root, (*path, attr), struct_field_type(dtype, attr))
                if ref is not None:
                    out.add(ref)
            elif kind in (ELEM, COPY):
                ftype = struct_field_type(dtype, attr) if is_struct_type(dtype) else None
                if is_array_type(ftype):
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
            if is_static_call(inner) and func_node.args:
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
        return Choice(tuple(candidates))

    def call(self, node: ast.Call) -> frozenset:
        callee = self.resolve(node.func)
        if is_static_call(callee):
            return EMPTY  # evaluated in Python at declaration time
        if not isinstance(node.func, (ast.Name, ast.Attribute)) and callee is None:
            self.val(node.func)
        args = [self.lv(a.value if isinstance(a, ast.Starred) else a) for a in node.args]
        kwargs = {k.arg: self.lv(k.value) for k in node.keywords if k.arg is not None}
        for k in node.keywords:
            if k.arg is None:
                self.val(k.value)
        callees = callee.candidates if isinstance(callee, Choice) else (callee,)
        result: frozenset = EMPTY
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
        unresolved_user = isinstance(callee, Choice) and not callees
        for refs in (*args, *kwargs.values()):
            for ref in refs:
                if ref[0] in (ELEM, ARR, STRUCT):
                    self.effect(ref, READ, node)
                    if unresolved_user:
                        self.effect(ref, STORE, node)
        return result

    def builtin_call(self, func: Any, args: list, kwargs: dict, node: ast.Call) -> frozenset:
        key = func.key
        names = builtin_param_names(func, len(args))
        spec = BUILTIN_WRITES.get(key)
        no_access = key in BUILTIN_NO_ACCESS
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
                    self.effect(ref, READ, node)  # a value argument
                elif ref[0] in (ARR, STRUCT):
                    if key in BUILTIN_PASS_THROUGH:
                        result.add(ref)
                    elif key == "view" and position == 0 and ref[0] == ARR:
                        ndim = ref[3]
                        view_ndim = None if ndim is None else max(ndim - (len(bound) - 1), 1)
                        result.add((ARR, ref[1], ref[2], view_ndim, ref[4]))
                    elif not no_access:
                        self.effect(ref, READ, node)
        return frozenset(result)

    def user_call(self, func: Any, args: list, kwargs: dict, node: ast.Call) -> frozenset:
        result: set = set()
        candidates = callable_overloads(func)
        fitting = [f for f in candidates if fits_call(f, len(args), kwargs)] or candidates
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
                    bound[params.index(name)] = bound.get(params.index(name), EMPTY) | refs
            if getattr(overload, "native_snippet", None) is not None:
                self.native = True
                self.native_call(bound, params, arg_types, node)
                continue
            callee_env: dict[int, frozenset] = {}
            for i, refs in bound.items():
                by_ref = is_ref_type(arg_types.get(params[i]))
                callee_refs = set()
                for kind, root, path, ndim, dtype in refs:
                    if kind in (ARR, STRUCT):
                        callee_refs.add((kind, i, (), ndim, dtype))
                    elif by_ref and kind == ELEM:
                        callee_refs.add((ELEM, i, (), None, dtype))
                    else:
                        if kind == ELEM:  # passed by value: loaded here
                            self.effect((kind, root, path, ndim, dtype), READ, node)
                        callee_refs.add((COPY, i, (), None, dtype))
                callee_env[i] = frozenset(callee_refs)
            summary = _summary(self.ctx, overload, callee_env)
            self.custom_grad |= summary.custom_grad
            self.custom_replay |= summary.custom_replay
            self.functions |= summary.functions
            self.native = self.native or summary.native
            for (param, subpath), lines in summary.effects.lines.items():
                for ref in bound.get(param, EMPTY):
                    target = map_path(ref, subpath)
                    for what in EFFECTS:
                        if lines[what] != NO_LINE:
                            self.effects.add(target[0], target[1], what, self.line(node))
            for kind, param, subpath, ndim, dtype in summary.returns:
                for ref in bound.get(param, EMPTY):
                    root, path = map_path(ref, subpath)
                    mapped_kind = COPY if ref[0] in (ELEM, COPY) and kind != ARR else kind
                    result.add((mapped_kind, root, path, ndim, dtype))
        return frozenset(result)

    def native_call(
        self, bound: dict[int, frozenset], params: list[str], arg_types: dict, node: ast.Call
    ) -> None:
        """A ``@wp.func_native`` call: its C++ body is not visible, so only its signature speaks.

        An element passed to a value parameter is loaded at the call (a proven read). An
        element passed to a ``wp.ref`` parameter, and an array or struct handed over whole,
        may be read or overwritten by the snippet: marked read and stored, and OPAQUE, so
        the guess never becomes an error."""
        for i, refs in bound.items():
            by_ref = i < len(params) and is_ref_type(arg_types.get(params[i]))
            for ref in refs:
                if ref[0] == ELEM and not by_ref:
                    self.effect(ref, READ, node)
                elif ref[0] in (ARR, STRUCT, ELEM):
                    self.effect(ref, READ, node)
                    self.effect(ref, STORE, node)
                    self.effect(ref, OPAQUE, node)

    def note_custom(self, func: Any) -> None:
        self.functions.add(func)
        if getattr(func, "custom_grad_func", None) is not None:
            self.custom_grad.add(func.key)
        if getattr(func, "custom_replay_func", None) is not None:
            self.custom_replay.add(func.key)


def _summary(ctx: WalkContext, func: Any, env: dict[int, frozenset]) -> Summary:
    key: Any = (func, tuple(sorted(env.items(), key=lambda item: item[0])))
    try:
        cached = SUMMARIES.get(key)
    except TypeError:  # an unhashable dtype: analyse without caching
        key, cached = None, None
    if cached is not None:
        return cached
    if func in ctx.in_progress:  # recursion (not valid Warp anyway)
        return EMPTY_SUMMARY
    ctx.in_progress.add(func)
    try:
        adj = func.adj
        params = [a.label for a in adj.args]
        names_env = {name: env.get(i, EMPTY) for i, name in enumerate(params)}
        ref_params = {name: i for i, name in enumerate(params) if is_ref_type(adj.arg_types.get(name))}
        walker = Walker(ctx, adj.func, function_def(adj), 0, names_env, ref_params)
        walker.run()
    finally:
        ctx.in_progress.discard(func)
    summary = Summary(
        walker.effects,
        frozenset(walker.returns),
        frozenset(walker.custom_grad),
        frozenset(walker.custom_replay),
        walker.native,
        frozenset(walker.functions),
    )
    if key is not None:
        SUMMARIES[key] = summary
    return summary


def function_def(adj: Any) -> ast.FunctionDef:
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
