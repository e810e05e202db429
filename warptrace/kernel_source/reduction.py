"""With which weights a kernel reduces the values of one array argument into another.

``reduction_weights(source, read, shapes)`` walks the kernel body (and the ``@wp.func``
callees it reaches, inlined) and tells, for each array argument the kernel writes, how the
written values depend on the elements of ``read``: as ``sum_e w * read[e]`` with one weight
``w`` for every element that contributes (a sum: 1.0, a mean: 1/N), linearly with weights
the source does not fix (a scalar argument, another array's values, different weights for
different elements: ``None``), or not linearly at all (a square, a maximum, a branch on the
values: not listed).

The weights are evaluated from what the trace knows: literals, the module's integer
constants (``N`` in ``/ float(N)``), array shapes (``terms.shape[0]``, ``len(terms)``, given
per argument in ``shapes``). A scalar argument's value is not in the trace (``/ float(n)``
with ``n`` passed at launch): linear, weight unknown. Anything the walk does not understand
makes the dependency non-linear (the answer the rules treat as "no evidence").
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from warptrace.kernel_source.facts import FunctionFacts
from warptrace.kernel_source.model import KernelSource
from warptrace.kernel_source.syntax import call_name, dotted, names_in, parse_function

__all__ = ["Reduction", "reduction_weights"]


@dataclass(frozen=True)
class Reduction:
    """An array argument the kernel writes linearly from the elements of the read argument."""

    output: str  # argument path of the written array (``loss``, ``state.total``)
    weight: float | None  # the one weight of every contributing element; None: not fixed
    line: int  # absolute line of the (first) store or atomic


def reduction_weights(
    source: KernelSource, read: str, shapes: dict[str, tuple[int, ...]]
) -> tuple[Reduction, ...]:
    """The array arguments of the kernel in ``source`` written linearly from ``read``'s values.

    ``shapes``: the shape of each array argument at the launch (for ``a.shape[0]``)."""
    kernel = source.kernel
    tree = parse_function(kernel.source) if kernel.parsed else None
    if tree is None:
        return ()
    walk = _Walk(source, kernel, read, shapes, dict(kernel.constants), tree)
    try:
        walk.run(tree)
    except _GiveUp:
        return ()
    out = []
    for output, (value, line) in walk.stores.items():
        if output == read or isinstance(value, _Bad) or not isinstance(value, _Lin):
            continue
        out.append(Reduction(output, value.weight, line))
    return tuple(out)


# ---------------------------------------------------------------- the value lattice
@dataclass(frozen=True)
class _Const:
    """Independent of the read array; ``value`` when the trace can evaluate it."""

    value: float | None = None


@dataclass(frozen=True)
class _Lin:
    """``sum_e weight * read[e]`` plus terms independent of it; weight None: not one fixed value.

    ``elements``: the index expressions (source text) of the elements summed, those of earlier
    loop iterations tagged (``j@``), so that a sum of two parts can tell distinct elements (a
    loop accumulating ``read[j]``, ``read[2 * i] + read[2 * i + 1]``) from one element counted
    twice (``read[i] + read[i]``); None when not known."""

    weight: float | None
    elements: frozenset[str] | None = None


@dataclass(frozen=True)
class _Bad:
    """Depends on the read array's values in a way that is not linear (or not understood)."""


@dataclass(frozen=True)
class _ArrayRef:
    """An array argument (or a field of a struct argument): ``path``."""

    path: str


_Value = _Const | _Lin | _Bad | _ArrayRef
_UNKNOWN = _Const()
_BAD = _Bad()


class _GiveUp(Exception):
    """The walk met a construct it cannot follow at all (recursion, a huge body)."""


def _same(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-300)


def _join(a: _Value, b: _Value) -> _Value:
    """The value of a local after one of two paths (branches, the store of each thread): the
    parts are alternatives, not summed, so one weight stays one weight."""
    if a == b:
        return a
    if isinstance(a, _Bad) or isinstance(b, _Bad):
        return _BAD
    if isinstance(a, _Lin) and isinstance(b, _Lin):
        elements = a.elements | b.elements if a.elements is not None and b.elements is not None else None
        return _Lin(a.weight if _same(a.weight, b.weight) else None, elements)
    if isinstance(a, _Lin):
        return a if isinstance(b, _Const) else _BAD
    if isinstance(b, _Lin):
        return b if isinstance(a, _Const) else _BAD
    if isinstance(a, _Const) and isinstance(b, _Const):
        return a if _same(a.value, b.value) else _UNKNOWN
    return _BAD


def _sum(a: _Lin, b: _Lin) -> _Lin:
    """``a + b``: one weight only when the two parts sum distinct elements with the same weight."""
    if a.elements is None or b.elements is None or a.elements & b.elements:
        return _Lin(None, None)
    elements = a.elements | b.elements
    if len(elements) > _MAX_ELEMENTS:
        return _Lin(None, None)
    return _Lin(a.weight if _same(a.weight, b.weight) else None, elements)


def _negate(value: _Value) -> _Value:
    return _binary(ast.Mult(), _Const(-1.0), value)


def _scale(lin: _Lin, factor: _Const, divide: bool = False) -> _Value:
    if lin.weight is None or factor.value is None:
        return _Lin(None, lin.elements)
    if divide:
        return _Lin(lin.weight / factor.value, lin.elements) if factor.value != 0 else _BAD
    return _Lin(lin.weight * factor.value, lin.elements)


def _binary(op: ast.operator, a: _Value, b: _Value) -> _Value:
    if isinstance(a, (_Bad, _ArrayRef)) or isinstance(b, (_Bad, _ArrayRef)):
        return _BAD
    if isinstance(a, _Const) and isinstance(b, _Const):
        return _Const(_fold(op, a.value, b.value))
    if isinstance(op, (ast.Add, ast.Sub)):
        if isinstance(op, ast.Sub):
            b = _negate(b)
            if isinstance(b, _Bad):
                return b
        if isinstance(a, _Lin) and isinstance(b, _Lin):
            return _sum(a, b)
        return a if isinstance(a, _Lin) else b
    if isinstance(op, ast.Mult):
        if isinstance(a, _Lin) and isinstance(b, _Const):
            return _scale(a, b)
        if isinstance(b, _Lin) and isinstance(a, _Const):
            return _scale(b, a)
        return _BAD
    if isinstance(op, ast.Div) and isinstance(a, _Lin) and isinstance(b, _Const):
        return _scale(a, b, divide=True)
    return _BAD


def _fold(op: ast.operator, a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    try:
        if isinstance(op, ast.Add):
            return a + b
        if isinstance(op, ast.Sub):
            return a - b
        if isinstance(op, ast.Mult):
            return a * b
        if isinstance(op, ast.Div):
            return a / b
        if isinstance(op, ast.FloorDiv):
            return float(a // b)
        if isinstance(op, ast.Pow):
            return float(a**b)
    except (ZeroDivisionError, OverflowError, ValueError):
        return None
    return None


# Calls that pass their one argument through unchanged (conversions); that combine two
# arguments like the operator; whose result never depends on array values.
_IDENTITY = {"float", "float32", "float64", "float16"}
_OPERATOR: dict[str, ast.operator] = {"add": ast.Add(), "sub": ast.Sub(), "mul": ast.Mult(), "div": ast.Div()}
_INDEX_CALLS = {"tid", "int", "int32", "int64", "uint32"}
_ATOMIC_ADD = {"atomic_add": 1.0, "atomic_sub": -1.0}
_MAX_DEPTH = 8  # @wp.func calls followed inside each other
_MAX_ELEMENTS = 64  # index expressions a sum keeps track of


class _Walk:
    """A forward walk over one function body: ``env`` maps locals to lattice values, ``stores``
    each written output to the join of the values stored into it (and its first line)."""

    def __init__(
        self,
        source: KernelSource,
        function: FunctionFacts,
        read: str,
        shapes: dict[str, tuple[int, ...]],
        constants: dict[str, int],
        tree: ast.FunctionDef,
        depth: int = 0,
        stores: dict[str, tuple[_Value, int]] | None = None,
    ) -> None:
        self.source = source
        self.function = function
        self.read = read
        self.shapes = shapes
        self.constants = constants
        self.depth = depth
        self.stores: dict[str, tuple[_Value, int]] = {} if stores is None else stores
        self.env: dict[str, _Value] = {}
        self.index_names: dict[str, frozenset[str]] = {}  # index text -> the names it reads
        self.returned: _Value | None = None
        self.offset = function.line - tree.lineno if function.line > 0 else 0

    # ------------------------------------------------------------ statements
    def run(self, tree: ast.FunctionDef) -> None:
        for arg in tree.args.args:
            if arg.arg not in self.env:
                self.env[arg.arg] = _ArrayRef(arg.arg) if arg.arg in self.function.array_params else _UNKNOWN
        self.block(tree.body)

    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.stmt(stmt)

    def stmt(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Assign):
            value = self.expr(node.value)
            for target in node.targets:
                self.assign(target, value, node)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.assign(node.target, self.expr(node.value), node)
        elif isinstance(node, ast.AugAssign):
            self.augassign(node)
        elif isinstance(node, ast.Expr):
            self.expr(node.value)
        elif isinstance(node, ast.If):
            self.branches(node.test, [node.body, node.orelse])
        elif isinstance(node, (ast.For, ast.While)):
            self.loop(node)
        elif isinstance(node, ast.Return):
            value = self.expr(node.value) if node.value is not None else _UNKNOWN
            self.returned = value if self.returned is None else _join(self.returned, value)
        elif isinstance(node, (ast.Pass, ast.Break, ast.Continue)):
            return
        else:
            raise _GiveUp(type(node).__name__)  # with, try, nested defs: not in Warp kernels

    def assign(self, target: ast.expr, value: _Value, node: ast.stmt) -> None:
        if isinstance(target, ast.Name):
            self.env[target.id] = value
        elif isinstance(target, ast.Subscript):
            array = self.array_of(target.value)
            if array is not None:
                self.store(array, value, node)
            else:  # a component of a local: v[0] = ...
                root = _root(target)
                if root is not None:
                    self.env[root] = _join_component(self.env.get(root, _UNKNOWN), value)
        elif isinstance(target, ast.Attribute):
            root = _root(target)
            if root is not None:
                self.env[root] = _join_component(self.env.get(root, _UNKNOWN), value)
        elif isinstance(target, ast.Tuple):
            for element in target.elts:
                self.assign(element, _BAD if isinstance(value, (_Lin, _Bad)) else _UNKNOWN, node)
        else:
            raise _GiveUp("assignment target")

    def augassign(self, node: ast.AugAssign) -> None:
        value = self.expr(node.value)
        target = node.target
        if isinstance(target, ast.Subscript):
            array = self.array_of(target.value)
            if array is not None:
                if isinstance(node.op, (ast.Add, ast.Sub)):  # an atomic accumulation into the array
                    self.store(array, _negate(value) if isinstance(node.op, ast.Sub) else value, node)
                else:
                    self.store(array, _BAD if isinstance(value, (_Lin, _Bad)) else _UNKNOWN, node)
                return
        current = self.expr(target)
        self.assign(target, _binary(node.op, current, value), node)

    def store(self, array: str, value: _Value, node: ast.stmt | _Statement) -> None:
        """``value`` stored or accumulated into ``array``: every thread (and every store) adds its
        own part, so the output's weights are those all the parts share."""
        if isinstance(value, _ArrayRef):
            value = _BAD
        line = node.lineno + self.offset
        old = self.stores.get(array)
        self.stores[array] = (value, line) if old is None else (_join(old[0], value), old[1])

    def branches(self, test: ast.expr, bodies: list[list[ast.stmt]]) -> None:
        condition = self.expr(test)
        before = dict(self.env)
        ends = []
        for body in bodies:
            self.env = dict(before)
            if isinstance(condition, (_Lin, _Bad)):  # a branch on the read values: not linear
                self.poisoned(body)
            self.block(body)
            ends.append(self.env)
        merged = dict(before)
        for name in set().union(*ends):
            values = [end.get(name, before.get(name, _UNKNOWN)) for end in ends]
            value = values[0]
            for other in values[1:]:
                value = _join(value, other)
            merged[name] = value
        self.env = merged

    def poisoned(self, body: list[ast.stmt]) -> None:
        """Every output stored and local assigned under a condition on the read values."""
        for node in body:
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                    targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                    for target in targets:
                        root = _root(target)
                        array = self.array_of(target.value) if isinstance(target, ast.Subscript) else None
                        if array is not None:
                            self.store(array, _BAD, sub)
                        elif root is not None:
                            self.env[root] = _BAD
                elif isinstance(sub, ast.Call) and call_name(sub.func) in _ATOMIC_ADD and sub.args:
                    array = self.array_of(sub.args[0])
                    if array is not None:
                        self.store(array, _BAD, node)

    def loop(self, node: ast.For | ast.While) -> None:
        """Two passes over the body: the second starts from what the first carried, its elements
        tagged as an earlier iteration's where their index follows the loop (the loop variable or
        a local the body assigns), so that an accumulator of ``read[j]`` sums distinct elements."""
        if isinstance(node, ast.For):
            iterable = self.expr(node.iter)
            if isinstance(iterable, (_Lin, _Bad)):
                raise _GiveUp("loop over values")
            if isinstance(node.target, ast.Name):
                self.env[node.target.id] = _UNKNOWN
        else:
            self.expr(node.test)
        varying = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        before = dict(self.env)
        self.block(node.body)
        self.env = {name: _earlier(value, varying, self.index_names) for name, value in self.env.items()}
        self.block(node.body)
        for name, value in list(self.env.items()):
            if name in before:
                self.env[name] = _join(before[name], value)
        self.block(node.orelse)

    # ------------------------------------------------------------ expressions
    def array_of(self, node: ast.expr) -> str | None:
        """The argument path of an array expression (``a``, ``state.q``), None for anything else."""
        if isinstance(node, ast.Name):
            value = self.env.get(node.id)
            return value.path if isinstance(value, _ArrayRef) else None
        path = dotted(node)
        if path is not None:
            head, _, rest = path.partition(".")
            value = self.env.get(head)
            if isinstance(value, _ArrayRef) or (head in self.function.params and value == _UNKNOWN):
                base = value.path if isinstance(value, _ArrayRef) else head
                full = f"{base}.{rest}"
                if full in self.shapes or full == self.read:
                    return full
        return None

    def expr(self, node: ast.expr) -> _Value:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                return _UNKNOWN
            return _Const(float(node.value))
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            if node.id in self.constants:
                return _Const(float(self.constants[node.id]))
            return _UNKNOWN
        if isinstance(node, ast.BinOp):
            return _binary(node.op, self.expr(node.left), self.expr(node.right))
        if isinstance(node, ast.UnaryOp):
            operand = self.expr(node.operand)
            if isinstance(node.op, ast.USub):
                return _negate(operand)
            if isinstance(node.op, ast.UAdd):
                return operand
            return _BAD if isinstance(operand, (_Lin, _Bad)) else _UNKNOWN
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.Attribute):
            array = self.array_of(node)
            if array is not None:
                return _ArrayRef(array)
            base = self.expr(node.value)
            return base if isinstance(base, (_Lin, _Bad)) else _UNKNOWN  # a component: linear
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, (ast.Compare, ast.BoolOp, ast.IfExp)):
            parts = [self.expr(child) for child in ast.iter_child_nodes(node) if isinstance(child, ast.expr)]
            return _BAD if any(isinstance(p, (_Lin, _Bad)) for p in parts) else _UNKNOWN
        if isinstance(node, ast.Tuple):
            parts = [self.expr(child) for child in node.elts]
            return _BAD if any(isinstance(p, (_Lin, _Bad)) for p in parts) else _UNKNOWN
        return _BAD

    def subscript(self, node: ast.Subscript) -> _Value:
        # a.shape[k]
        if isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
            array = self.array_of(node.value.value)
            index = node.slice
            if array is not None and isinstance(index, ast.Constant) and isinstance(index.value, int):
                shape = self.shapes.get(array)
                if shape is not None and 0 <= index.value < len(shape):
                    return _Const(float(shape[index.value]))
                return _UNKNOWN
        array = self.array_of(node.value)
        position = self.expr(node.slice)
        if array is not None:
            if isinstance(position, (_Lin, _Bad)):
                return _BAD  # an index computed from the read values
            if array != self.read:
                return _UNKNOWN
            text = ast.unparse(node.slice)
            self.index_names[text] = frozenset(names_in(node.slice))
            return _Lin(1.0, frozenset([text]))
        base = self.expr(node.value)
        if isinstance(position, (_Lin, _Bad)):
            return _BAD
        return base if isinstance(base, (_Lin, _Bad)) else _UNKNOWN  # a component of a local

    def call(self, node: ast.Call) -> _Value:
        name = call_name(node.func)
        if name in _ATOMIC_ADD and len(node.args) >= 3:
            array = self.array_of(node.args[0])
            for index in node.args[1:-1]:
                if isinstance(self.expr(index), (_Lin, _Bad)):
                    return _BAD
            value = self.expr(node.args[-1])
            if array is not None:
                if _ATOMIC_ADD[name] < 0:
                    value = _negate(value)
                self.store(array, value, _Statement(node.lineno))
            return _UNKNOWN  # the old value: not used as a reduction of the read values
        if name == "len" and len(node.args) == 1:
            array = self.array_of(node.args[0])
            shape = self.shapes.get(array) if array is not None else None
            return _Const(float(shape[0])) if shape else _UNKNOWN
        args = [self.expr(arg) for arg in node.args]
        if name in _IDENTITY and len(args) == 1:
            return args[0] if not isinstance(args[0], _ArrayRef) else _BAD
        if name in _OPERATOR and len(args) == 2:
            return _binary(_OPERATOR[name], args[0], args[1])
        if name == "neg" and len(args) == 1:
            return _negate(args[0])
        if name in _INDEX_CALLS:
            return _BAD if any(isinstance(a, (_Lin, _Bad)) for a in args) else _UNKNOWN
        callee = self.callee(node)
        if callee is not None:
            return self.inline(callee, node, args)
        if any(isinstance(a, (_Lin, _Bad)) for a in args) or node.keywords:
            return _BAD
        if any(isinstance(a, _ArrayRef) and a.path == self.read for a in args):
            return _BAD  # the array handed to something the walk cannot follow
        return _UNKNOWN

    def callee(self, node: ast.Call) -> FunctionFacts | None:
        name = call_name(node.func)
        for function in self.source.functions:
            if function.role == "func" and function.parsed and function.name.split(".")[-1] == name:
                return function
        return None

    def inline(self, callee: FunctionFacts, node: ast.Call, args: list[_Value]) -> _Value:
        if self.depth >= _MAX_DEPTH:
            raise _GiveUp("call depth")
        tree = parse_function(callee.source)
        if tree is None or node.keywords or len(args) != len(tree.args.args):
            return _BAD if any(isinstance(a, (_Lin, _Bad, _ArrayRef)) for a in args) else _UNKNOWN
        inner = _Walk(
            self.source,
            callee,
            self.read,
            self.shapes,
            dict(callee.constants),
            tree,
            self.depth + 1,
            self.stores,
        )
        inner.index_names = self.index_names
        for param, value in zip(tree.args.args, args):
            inner.env[param.arg] = value
        inner.run(tree)
        return inner.returned if inner.returned is not None else _UNKNOWN


@dataclass(frozen=True)
class _Statement:
    """Where an atomic call stands (what :meth:`_Walk.store` needs of a statement)."""

    lineno: int


def _earlier(value: _Value, varying: set[str], names: dict[str, frozenset[str]]) -> _Value:
    """``value`` as an earlier loop iteration left it: elements whose index names something the
    loop changes are other elements in the next iteration (``names``: the names of each index
    text)."""
    if not isinstance(value, _Lin) or value.elements is None:
        return value
    tagged = frozenset(
        text + "@" if names.get(text.rstrip("@"), frozenset()) & varying else text for text in value.elements
    )
    return _Lin(value.weight, tagged)


def _root(target: ast.expr) -> str | None:
    while isinstance(target, (ast.Attribute, ast.Subscript)):
        target = target.value
    return target.id if isinstance(target, ast.Name) else None


def _join_component(whole: _Value, part: _Value) -> _Value:
    """A local after one of its components is assigned."""
    if isinstance(whole, (_Bad, _ArrayRef)) or isinstance(part, (_Bad, _ArrayRef)):
        return _BAD
    if isinstance(whole, _Lin) or isinstance(part, _Lin):
        return _join(whole, part) if isinstance(whole, _Lin) and isinstance(part, _Lin) else _Lin(None)
    return _UNKNOWN
