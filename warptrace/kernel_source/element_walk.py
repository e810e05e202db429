"""The program-order walk behind :mod:`.elements`: one kernel, its ``@wp.func`` callees
inlined with their arrays bound to the kernel's argument paths, every value numbered (two
index expressions with the same number address the same element in one thread), every load
tainted (which loads an adjoint needs: a product with something that carries a gradient, a
division, a nonlinear function, a branch, an index). The walk records the loads, stores,
additive updates and opaque accesses of each array, in order; :mod:`.elements` answers the
per-element question from them.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

from warptrace.kernel_source import facts as F
from warptrace.kernel_source.facts import FunctionFacts
from warptrace.kernel_source.local_flow import array_locals
from warptrace.kernel_source.syntax import (
    call_name,
    constructs_value,
    dotted,
    parse_function,
    root_name,
    walk,
)

__all__ = ["ANY", "Event", "Walker", "walk_kernel"]

ANY = "*"  # the path of an array local of unknown origin: it may be any argument

_LINEAR_CALLS = frozenset(
    (
        "float", "float16", "float32", "float64", "add", "sub", "neg", "pos", "transpose", "spatial_top",
        "spatial_bottom", "transform_get_translation", "transform_get_rotation", "extract", "tile",
        "untile", "tile_sum", "tile_transpose", "tile_broadcast", "tile_reshape", "tile_squeeze",
        "tile_view", "tile_fft", "tile_ifft",
    )
)  # fmt: skip
_BILINEAR_CALLS = frozenset(("mul", "dot", "cross", "outer", "cw_mul", "ddot"))
_CONSTANT_CALLS = frozenset(
    ("int", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "len", "bool")
)
_VALUE_TYPES = ("float", "int", "uint", "bool", "vec", "mat", "quat", "transform", "spatial", "any", "scalar")
_MAX_DEPTH = 12  # Warp functions cannot recurse; a guard against a call graph resolved wrongly


@dataclass(frozen=True)
class _Val:
    labels: frozenset[int] = frozenset()  # loads whose values this depends on
    active: bool = False  # depends on an array that carries a gradient
    number: Hashable = None  # value number: equal numbers, equal values (None: unknown)


@dataclass
class Event:
    kind: str  # "load", "store", "update", "read" (opaque, needed), "write" (opaque)
    path: str
    index: Hashable  # value number of the index; None: unknown element
    seq: int
    loops: tuple[int, ...]
    function: str
    file: str
    line: int
    label: int = -1


@dataclass
class _Frame:
    facts: FunctionFacts
    tree: ast.FunctionDef
    env: dict[str, _Val]
    arrays: dict[str, tuple[str, bool]]  # local name -> (argument path, whole: False for a view)
    differentiated: bool
    returns: list[_Val] = field(default_factory=list)
    views: frozenset[str] = frozenset()  # locals bound to arrays (array_locals)

    def line(self, node: ast.AST) -> int:
        lineno = getattr(node, "lineno", self.tree.lineno)
        return self.facts.line + lineno - self.tree.lineno if self.facts.line >= 0 else lineno


def walk_kernel(
    kernel: FunctionFacts,
    functions: tuple[FunctionFacts, ...],
    custom: frozenset[str],
    active: frozenset[str],
) -> Walker | None:
    """The walk of ``kernel`` (None when its source does not parse). ``custom``: names of the
    functions that have a ``@wp.func_grad``; ``active``: argument paths whose arrays carry a
    gradient at the launch."""
    tree = parse_function(kernel.source) if kernel.parsed else None
    if tree is None:
        return None
    walker = Walker(functions, custom, active)
    frame = _Frame(kernel, tree, {}, {}, True)
    arrays = set(kernel.array_params)
    for arg in tree.args.args:
        if arg.arg in arrays or not _value_type(arg.annotation):
            frame.arrays[arg.arg] = (arg.arg, True)  # an array, or a struct holding arrays
        if arg.arg not in arrays:
            frame.env[arg.arg] = _Val(number=("param", arg.arg))
    walker.run(frame)
    return walker


def _value_type(annotation: ast.expr | None) -> bool:
    """Whether a parameter annotation names a value (a scalar, vector, matrix, ...), not a
    ``@wp.struct`` (whose fields may be arrays)."""
    if annotation is None or isinstance(annotation, (ast.Call, ast.Constant)):
        return True
    name = call_name(annotation.value if isinstance(annotation, ast.Subscript) else annotation)
    return name.lower().startswith(_VALUE_TYPES)


class Walker:
    """Walks one kernel; ``events``, ``needed`` (labels of the loads an adjoint needs) and
    ``everything`` (a statement the walk does not understand: every load counts) are its result."""

    def __init__(
        self, functions: tuple[FunctionFacts, ...], custom: frozenset[str], active: frozenset[str]
    ) -> None:
        self.functions = [f for f in functions if f.role == F.FUNC and f.parsed]
        self.grads = {f.of: f for f in functions if f.role == F.FUNC_GRAD and f.parsed}
        self.custom = custom
        self.active = active
        self.events: list[Event] = []
        self.needed: set[int] = set()
        self.everything = False  # something the walk does not understand: every load is needed
        self.fresh = itertools.count()
        self.labels: dict[tuple[int, tuple[int, ...]], int] = {}
        self.loops: list[int] = []
        self.calls: list[int] = []  # ids of the call nodes being inlined (a label's context)
        self.quiet = 0  # > 0 while a loop body is walked a first time (taint only, no events)
        self.epoch: dict[str, int] = {}  # per path, bumped by every write: loads before and after differ

    # ------------------------------------------------------------ results

    # ------------------------------------------------------------ helpers

    def number(self) -> Hashable:
        return ("fresh", next(self.fresh))

    def need(self, *values: _Val) -> None:
        for value in values:
            self.needed |= value.labels

    def record(
        self, frame: _Frame, kind: str, path: str, index: Hashable, node: ast.AST, label: int = -1
    ) -> None:
        if kind in ("store", "update", "write"):
            self.epoch[path] = self.epoch.get(path, 0) + 1
        if self.quiet:
            return
        self.events.append(
            Event(
                kind,
                path,
                index,
                len(self.events),
                tuple(self.loops),
                frame.facts.name,
                frame.facts.file,
                frame.line(node),
                label,
            )
        )

    def opaque(self, frame: _Frame, kind: str, path: str, node: ast.AST) -> None:
        """A read (whose value counts as needed) or a write of unknown elements of ``path``."""
        if kind == "write" or frame.differentiated:
            self.record(frame, kind, path, None, node)

    def array(self, frame: _Frame, node: ast.expr) -> tuple[str, bool] | None:
        """(argument path, whole) of an expression naming an array (``x``, ``state.q``, a local
        alias or view), else None."""
        if isinstance(node, ast.Name):
            return frame.arrays.get(node.id)
        if isinstance(node, ast.Attribute):
            text = dotted(node)
            if text is None:
                return None
            head, _, rest = text.partition(".")
            base = frame.arrays.get(head)
            if base is None:
                return None
            return (f"{base[0]}.{rest}", base[1])
        return None

    def element(self, frame: _Frame, node: ast.Subscript) -> tuple[str, Hashable, list[_Val]] | None:
        """(path, index number, index values) of ``x[i]`` / ``x[i, j]`` / ``state.q[i]``, else None."""
        target = self.array(frame, node.value)
        if target is None:
            return None
        indices = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        values = [self.expr(frame, index) for index in indices]
        whole = target[1] and not any(isinstance(i, ast.Slice) for i in indices)
        number = (
            tuple(v.number for v in values) if whole and all(v.number is not None for v in values) else None
        )
        return target[0], number, values

    # ------------------------------------------------------------ statements

    def run(self, frame: _Frame) -> None:
        frame.views = array_locals(frame.tree)
        self.block(frame, frame.tree.body)

    def block(self, frame: _Frame, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.stmt(frame, stmt)

    def stmt(self, frame: _Frame, node: ast.stmt) -> None:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            if node.value is None:
                return
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if names and all(name in frame.views for name in names):
                bound = self.bind_view(frame, node.value)
                for name in names:
                    frame.arrays[name] = bound
                return
            value = self.expr(frame, node.value)
            for target in targets:
                self.assign(frame, target, value, node)
        elif isinstance(node, ast.AugAssign):
            self.aug_assign(frame, node)
        elif isinstance(node, ast.Expr):
            self.expr(frame, node.value)
        elif isinstance(node, ast.Return):
            if node.value is not None:
                frame.returns.append(self.expr(frame, node.value))
        elif isinstance(node, ast.If):
            self.need(self.expr(frame, node.test))
            before = dict(frame.env)
            self.block(frame, node.body)
            left = frame.env
            frame.env = dict(before)
            self.block(frame, node.orelse)
            frame.env = self.merge(left, frame.env)
        elif isinstance(node, (ast.For, ast.While)):
            self.loop(frame, node)
        elif isinstance(node, (ast.Pass, ast.Break, ast.Continue)):
            return
        else:
            self.everything = True

    def bind_view(self, frame: _Frame, value: ast.expr) -> tuple[str, bool]:
        """What a local array (an alias, a slice, a sub-array, ``wp.array(ptr=...)``) refers to:
        (argument path, whole), with ANY for an array of unknown origin."""
        if isinstance(value, (ast.Name, ast.Attribute)):
            found = self.array(frame, value)
            return found if found is not None else (ANY, False)
        base = value
        while isinstance(base, ast.Subscript):
            self.need(self.expr(frame, base.slice))
            base = base.value
        found = self.array(frame, base) if isinstance(base, (ast.Name, ast.Attribute)) else None
        return (found[0], False) if found is not None else (ANY, False)

    def store_element(self, frame: _Frame, target: ast.expr) -> tuple[str, Hashable, list[_Val]] | None:
        """The array element a store target writes: ``x[i]``, ``x[i].x``, ``x[i][0]``,
        ``a2d[i][j]`` (the outermost subscript of an array expression)."""
        node = target
        while isinstance(node, (ast.Subscript, ast.Attribute)):
            if isinstance(node, ast.Subscript) and self.array(frame, node.value) is not None:
                return self.element(frame, node)
            if isinstance(node, ast.Subscript):
                inner = node.value
                while isinstance(inner, ast.Subscript):
                    inner = inner.value
                if self.array(frame, inner) is not None:  # a2d[i][j]: element a2d[i], unknown part
                    found = self.element(frame, node.value) if isinstance(node.value, ast.Subscript) else None
                    if found is not None:
                        return found[0], None, found[2]
            node = node.value
        return None

    def merge(self, left: dict[str, _Val], right: dict[str, _Val]) -> dict[str, _Val]:
        out = dict(left)
        for name, value in right.items():
            old = out.get(name)
            if old is None:
                out[name] = value
            elif old != value:
                out[name] = _Val(old.labels | value.labels, old.active or value.active, self.number())
        return out

    def loop(self, frame: _Frame, node: ast.For | ast.While) -> None:
        header = node.iter if isinstance(node, ast.For) else node.test
        self.need(self.expr(frame, header))
        assigned = {
            n.id
            for stmt in node.body
            for n in walk(stmt)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        if isinstance(node, ast.For):
            assigned |= {n.id for n in walk(node.target) if isinstance(n, ast.Name)}
        loop_id = next(self.fresh)
        self.loops.append(loop_id)
        for recording in (False, True):  # the first pass carries taint around the loop
            for name in assigned:
                old = frame.env.get(name, _Val())
                frame.env[name] = _Val(old.labels, old.active, self.number())
            if isinstance(node, ast.While):
                self.need(self.expr(frame, node.test))
            self.quiet += not recording
            self.block(frame, node.body)
            self.quiet -= not recording
        self.loops.pop()
        for name in assigned:
            old = frame.env.get(name, _Val())
            frame.env[name] = _Val(old.labels, old.active, self.number())
        self.block(frame, node.orelse)

    def assign(self, frame: _Frame, target: ast.expr, value: _Val, node: ast.stmt) -> None:
        if isinstance(target, ast.Name):
            frame.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            for position, element in enumerate(target.elts):
                number = ("part", value.number, position) if value.number is not None else None
                self.assign(frame, element, _Val(value.labels, value.active, number), node)
        elif isinstance(target, (ast.Subscript, ast.Attribute)):
            found = self.store_element(frame, target)
            if found is not None:
                path, index, values = found
                self.need(*values)
                self.record(frame, "store", path, index, node)
                return
            self.component(frame, target, value)
        else:
            self.everything = True

    def component(self, frame: _Frame, target: ast.Subscript | ast.Attribute, value: _Val) -> None:
        """``v[0] = e``, ``v.x = e``, ``m[i][j] = e`` on a local value."""
        if isinstance(target, ast.Subscript):
            self.need(self.expr(frame, target.slice))
        root = root_name(target)
        if root is None:
            self.everything = True
            return
        old = frame.env.get(root, _Val())
        frame.env[root] = _Val(old.labels | value.labels, old.active or value.active, self.number())

    def aug_assign(self, frame: _Frame, node: ast.AugAssign) -> None:
        value = self.expr(frame, node.value)
        target = node.target
        found = (
            self.store_element(frame, target) if isinstance(target, (ast.Subscript, ast.Attribute)) else None
        )
        if found is not None:
            path, index, values = found
            self.need(*values)
            if isinstance(node.op, (ast.Add, ast.Sub)):
                self.record(frame, "update", path, index, node)
            else:  # x[i] *= s: a load and a store (WT401 reports it)
                self.needed.add(self.load(frame, path, index, node))
                self.record(frame, "store", path, index, node)
            return
        old = self.expr(frame, target)
        new = self.binop(node.op, old, value)
        if isinstance(target, ast.Name):
            frame.env[target.id] = new
        elif isinstance(target, (ast.Subscript, ast.Attribute)):
            self.component(frame, target, new)
        else:
            self.everything = True

    # ------------------------------------------------------------ expressions

    def load(self, frame: _Frame, path: str, index: Hashable, node: ast.AST) -> int:
        key = (id(node), tuple(self.calls))
        label = self.labels.setdefault(key, len(self.labels))
        if frame.differentiated:
            self.record(frame, "load", path, index, node, label)
        return label

    def expr(self, frame: _Frame, node: ast.expr) -> _Val:
        if isinstance(node, ast.Constant):
            return _Val(number=("const", repr(node.value)))
        if isinstance(node, ast.Name):
            if node.id in frame.env:
                return frame.env[node.id]
            return _Val(number=("global", node.id))
        if isinstance(node, ast.Attribute):
            if self.array(frame, node) is not None:
                return _Val(number=self.number())
            base = self.expr(frame, node.value)
            number = ("attr", base.number, node.attr) if base.number is not None else None
            return _Val(base.labels, base.active, number)
        if isinstance(node, ast.Subscript):
            found = self.element(frame, node)
            if found is not None:
                path, index, values = found
                self.need(*values)
                label = self.load(frame, path, index, node)
                active = path in self.active or path.split(".")[0] in self.active
                loaded: Hashable = (
                    ("load", path, index, self.epoch.get(path, 0)) if index is not None else self.number()
                )
                return _Val(frozenset((label,)) if frame.differentiated else frozenset(), active, loaded)
            base = self.expr(frame, node.value)
            index_value = self.expr(frame, node.slice)
            self.need(index_value)
            part: Hashable = ("sub", base.number, index_value.number) if base.number is not None else None
            return _Val(base.labels, base.active, part)
        if isinstance(node, (ast.Tuple, ast.List)):
            values = [self.expr(frame, e) for e in node.elts]
            return _union(values, ("tuple", *(v.number for v in values)))
        if isinstance(node, ast.UnaryOp):
            value = self.expr(frame, node.operand)
            if isinstance(node.op, ast.Not):
                self.need(value)
                return _Val(number=("not", value.number))
            return _Val(value.labels, value.active, ("unary", type(node.op).__name__, value.number))
        if isinstance(node, ast.BinOp):
            return self.binop(node.op, self.expr(frame, node.left), self.expr(frame, node.right))
        if isinstance(node, (ast.Compare, ast.BoolOp)):
            parts = [node.left, *node.comparators] if isinstance(node, ast.Compare) else node.values
            values = [self.expr(frame, p) for p in parts]
            self.need(*values)
            return _Val(number=("cmp", ast.dump(node)) if all(v.number is not None for v in values) else None)
        if isinstance(node, ast.IfExp):
            self.need(self.expr(frame, node.test))
            return _union([self.expr(frame, node.body), self.expr(frame, node.orelse)], self.number())
        if isinstance(node, ast.Call):
            return self.call(frame, node)
        if isinstance(node, ast.Slice):
            parts = [p for p in (node.lower, node.upper, node.step) if p is not None]
            return _union([self.expr(frame, p) for p in parts], None)
        self.everything = True
        return _Val(number=self.number())

    def binop(self, op: ast.operator, left: _Val, right: _Val) -> _Val:
        if isinstance(op, (ast.Add, ast.Sub)):
            pass
        elif isinstance(op, (ast.Mult, ast.MatMult)):
            if right.active:
                self.need(left)
            if left.active:
                self.need(right)
        elif isinstance(op, ast.Div):
            self.need(right)
            if right.active:
                self.need(left)
        else:
            self.need(left, right)
        number = (
            ("bin", type(op).__name__, left.number, right.number)
            if left.number is not None and right.number is not None
            else None
        )
        return _Val(left.labels | right.labels, left.active or right.active, number)

    def call(self, frame: _Frame, node: ast.Call) -> _Val:
        name = call_name(node.func)
        args = list(node.args) + [k.value for k in node.keywords]
        if name == "tid":
            return _Val(number=("tid", len(node.args)))
        if name == "static":
            return _Val(number=("static", ast.dump(node)))
        callee = self.function(node)
        if callee is not None:
            return self.inline(frame, node, callee)
        arrays = [(arg, self.array(frame, arg)) for arg in args]
        if name.startswith("atomic_") and node.args and arrays[0][1] is not None:
            path, whole = arrays[0][1]
            indices = [self.expr(frame, a) for a in node.args[1:-1]]
            self.need(*indices)
            value = self.expr(frame, node.args[-1]) if len(node.args) >= 2 else _Val()
            number = (
                tuple(v.number for v in indices)
                if whole and all(v.number is not None for v in indices)
                else None
            )
            additive = name in ("atomic_add", "atomic_sub")
            if not additive:
                self.need(value)
            self.record(frame, "update" if additive else "store", path, number, node)
            return _Val(number=self.number())
        if name.startswith("tile_") and arrays and arrays[0][1] is not None:
            path = arrays[0][1][0]
            rest = [self.expr(frame, a) for a in args[1:] if self.array(frame, a) is None]
            if name == "tile_load":
                self.need(*rest)
                label = self.load(frame, path, None, node)
                active = path in self.active or path.split(".")[0] in self.active
                return _Val(
                    frozenset((label,)) if frame.differentiated else frozenset(), active, self.number()
                )
            if name in ("tile_store", "tile_atomic_add"):
                self.record(frame, "update" if name == "tile_atomic_add" else "store", path, None, node)
                return _Val(number=self.number())
        values: list[_Val] = []
        for arg, target in arrays:
            if target is not None:
                if name in ("len", "shape"):
                    continue
                # an array handed whole to a builtin or native function: its values may be used
                # in any way, and a native function may write them
                self.opaque(frame, "read", target[0], node)
                if not (dotted(node.func) or "").startswith(("wp.", "warp.")):
                    self.opaque(frame, "write", target[0], node)
                continue
            values.append(self.expr(frame, arg))
        if name in _CONSTANT_CALLS:
            self.need(*values)
            return _Val(number=("call", name, *(v.number for v in values)))
        number = (
            ("call", name, *(v.number for v in values)) if all(v.number is not None for v in values) else None
        )
        if name in _LINEAR_CALLS or constructs_value(name):
            return _union(values, number)
        if name in _BILINEAR_CALLS:
            for index, value in enumerate(values):
                if any(other.active for i, other in enumerate(values) if i != index):
                    self.need(value)
            return _union(values, number)
        self.need(*values)  # a nonlinear builtin: its adjoint evaluates it at these values
        return _union(values, number)

    def function(self, node: ast.Call) -> FunctionFacts | None:
        name = call_name(node.func)
        text = (dotted(node.func) or name).replace(".", "__")
        found = [
            f for f in self.functions if f.name.replace(".", "__").split("__")[-1] == name or f.name == text
        ]
        return found[0] if found and len(self.calls) < _MAX_DEPTH else None

    def inline(self, frame: _Frame, node: ast.Call, callee: FunctionFacts) -> _Val:
        tree = parse_function(callee.source)
        if tree is None:
            self.everything = True
            return _Val(number=self.number())
        differentiated = frame.differentiated and callee.name not in self.custom
        inner = _Frame(callee, tree, {}, {}, differentiated)
        params = [a.arg for a in tree.args.args]
        given: list[tuple[str, ast.expr]] = list(zip(params, node.args))
        given += [(k.arg, k.value) for k in node.keywords if k.arg in params]
        bound: list[_Val] = []
        for param, arg in given:
            target = self.array(frame, arg)
            if target is None and isinstance(arg, ast.Subscript) and _sliced(arg):
                target = self.bind_view(frame, arg)  # f(x[0:n]): a view of x
            if target is not None:
                inner.arrays[param] = target
                continue
            value = self.expr(frame, arg)
            inner.env[param] = value
            bound.append(value)
        for param in params:
            inner.env.setdefault(param, _Val(number=self.number()))
        self.calls.append(id(node))
        try:
            inner.views = array_locals(tree)
            self.block(inner, tree.body)
        finally:
            self.calls.pop()
        if callee.name in self.custom and frame.differentiated:
            # the custom adjoint gets the argument values and reads the arrays after the call
            self.need(*bound)
            grad = self.grads.get(callee.name)
            used = _names_used(grad) if grad is not None else None
            for param, arg in given:
                target = self.array(frame, arg)
                if target is not None and (used is None or param in used):
                    self.opaque(frame, "read", target[0], node)
        result = _union(inner.returns, None)
        return _Val(result.labels, result.active, self.number())


def _sliced(node: ast.Subscript) -> bool:
    indices = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return any(isinstance(i, ast.Slice) for i in indices)


def _union(values: Iterable[_Val], number: Hashable) -> _Val:
    labels: frozenset[int] = frozenset()
    active = False
    for value in values:
        labels |= value.labels
        active = active or value.active
    return _Val(labels, active, number)


def _names_used(function: FunctionFacts) -> set[str] | None:
    tree = parse_function(function.source)
    if tree is None:
        return None
    return {n.id for stmt in tree.body for n in walk(stmt) if isinstance(n, ast.Name)}
