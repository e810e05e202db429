"""How a function uses the values that some of its calls return (``wp.atomic_*``, user functions).

Warp 1.19 does not replay an atomic of the kernel body in the adjoint kernel (the builtin is
``skip_replay``: its statement is commented out of the replay), so the variable holding the
returned old value is declared in the backward function and never assigned: the adjoint
reads an undefined value. And the old value has no adjoint (``adj_atomic_*`` ignore
``adj_ret``). Measured for ``atomic_add``/``sub``/``min``/``max``/``exch``/``cas`` on int and
float arrays (``tests/test_warp_mechanisms_atomics.py``), the returned value

- used as an index (``out[slot] = ...``, an atomic's index argument): the adjoint reads and
  writes the adjoints of the wrong elements (every thread read slot 0 on the CPU);
- tested by a branch (``if``/``while`` test, conditional expression, ``wp.where``
  condition, loop bounds): the replay takes a branch the forward did not;
- a factor of a differentiable value (``float(k) * x[i]``, ``wp.min(k, x[i])``, an argument
  of a call with another operand): that operand's adjoint is computed with the undefined
  value (0 or NaN where the truth was k);

gives wrong gradients, while stored, added (``x[i] + float(k)``), cast or returned it leaves
every other gradient exact; only the gradient *through* the old value (into the atomic's
array) is lost, since the old value carries none. A user function's own statements are
replayed with the call (the atomic runs again), so a value it returns is judged at its
callers (``returned``).

The analysis is flow-insensitive (every assignment of a local counts, as in
:func:`warptrace.kernel_source.local_flow.local_deps`): a value taints each local assigned
from an expression that reads it, transitively; each sensitive position it reaches is one
use, with the names of its partner (the array indexed, the other operand of the product).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

from warptrace.kernel_source.syntax import call_name, names_in, root_name, walk

__all__ = ["BRANCH", "FACTOR", "INDEX", "VALUE", "ResultUse", "result_uses"]

VALUE, FACTOR, BRANCH, INDEX = "value", "factor", "branch", "index"
_RANK = {None: 0, VALUE: 1, FACTOR: 2, BRANCH: 3, INDEX: 4}

# calls whose adjoint never reads one argument to differentiate another (casts, constructors,
# sums): a value passed through them keeps the use of the call's result
_LINEAR = frozenset(
    {
        "float", "float16", "float32", "float64", "int", "int8", "int16", "int32", "int64",
        "uint8", "uint16", "uint32", "uint64", "bool", "add", "sub", "neg", "pos",
        "vector", "matrix", "quaternion", "transformation", "vec2", "vec3", "vec4", "quat",
        "transform", "spatial_vector", "mat22", "mat33", "mat44", "spatial_matrix",
        "vec2f", "vec3f", "vec4f", "vec2d", "vec3d", "vec4d", "vec2i", "vec3i", "vec4i",
        "mat22f", "mat33f", "mat44f", "mat22d", "mat33d", "mat44d", "quatf", "quatd",
        "transformf", "transformd",
    }
)  # fmt: skip
_ADDITIVE_OPS = (ast.Add, ast.Sub)
_SELECTS = ("where", "select")


@dataclass(frozen=True)
class ResultUse:
    """The uses of one call's returned value: ``(kind, partner names)`` pairs, strongest
    kind first, and whether a ``return`` hands the value to the function's callers."""

    uses: tuple[tuple[str, tuple[str, ...]], ...]
    returned: bool

    @property
    def kind(self) -> str:
        """The strongest use ("" when the value is never used)."""
        return self.uses[0][0] if self.uses else ""


def atomic_index_args(node: ast.Call) -> tuple[ast.expr, ...]:
    """The index arguments of an atomic call (between the array and the value operands)."""
    values = 2 if call_name(node.func) == "atomic_cas" else 1
    return tuple(node.args[1 : max(1, len(node.args) - values)])


def result_uses(
    tree: ast.FunctionDef, calls: Iterable[ast.Call], memory: Iterable[str] = ()
) -> dict[int, ResultUse]:
    """The uses of the value each call of ``calls`` (nodes of ``tree``) returns, by ``id(node)``.
    ``memory``: the names that denote memory rather than values (array and struct parameters,
    locals bound to an array): a value stored into an element stays there, the replay reads
    it back exactly, so a store into one is a use but not a flow."""
    sources = {id(node) for node in calls}
    if not sources:
        return {}
    sites = _Sites(sources, frozenset(memory))
    sites.block(tree.body)
    found: dict[int, ResultUse] = {}
    for source in sources:
        tainted: set[str] = set()
        todo = list(sites.call_flows.get(source, ()))
        while todo:
            name = todo.pop()
            if name not in tainted:
                tainted.add(name)
                todo.extend(sites.flows.get(name, ()))
        uses: dict[tuple[str, tuple[str, ...]], None] = {}
        for kind, what, partners in sites.sites:
            if what == source or what in tainted:
                uses[(kind, tuple(sorted(set(partners))))] = None
        returned = source in sites.returned or bool(tainted & sites.returned_names)
        ordered = sorted(uses, key=lambda use: (-_RANK[use[0]], use[1]))
        found[source] = ResultUse(tuple(ordered), returned)
    return found


class _Sites:
    """One pass over a body: how values flow between locals, and every position a local or a
    source call's value is read in, with its kind and partners."""

    def __init__(self, sources: set[int], memory: frozenset[str]) -> None:
        self.sources = sources
        self.memory = memory
        self.flows: dict[str, set[str]] = {}  # local -> locals assigned from it
        self.call_flows: dict[int, set[str]] = {}  # source call -> locals assigned from it
        # (kind, name or source call id, partner names) per sensitive read
        self.sites: list[tuple[str, str | int, tuple[str, ...]]] = []
        self.returned: set[int] = set()
        self.returned_names: set[str] = set()

    # ------------------------------------------------------------ statements

    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.stmt(stmt)

    def stmt(self, node: ast.stmt) -> None:
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            self.assign(node)
        elif isinstance(node, (ast.If, ast.While)):
            self.expr(node.test, BRANCH, ())
            self.block(node.body)
            self.block(node.orelse)
        elif isinstance(node, ast.For):
            # loop bounds: the replay runs another number of iterations (the loop variable
            # itself is the replay's own counter, not the value)
            self.expr(node.iter, BRANCH, ())
            self.block(node.body)
            self.block(node.orelse)
        elif isinstance(node, ast.Return):
            if node.value is not None:
                self.expr(node.value, VALUE, ())
                self.returned_names |= names_in(node.value)
                self.returned |= {id(n) for n in walk(node.value) if id(n) in self.sources}
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.expr(child, VALUE, ())
                elif isinstance(child, ast.stmt):
                    self.stmt(child)
            for name in ("body", "orelse", "finalbody", "handlers"):
                nested = getattr(node, name, None)
                if isinstance(nested, list):
                    self.block([s for s in nested if isinstance(s, ast.stmt)])

    def assign(self, node: ast.Assign | ast.AnnAssign | ast.AugAssign) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        flat = [t for target in targets for t in _flat(target)]
        stored: list[str] = []  # memory the value is stored into
        locals_: list[str] = []  # locals (whole, or a component) that now hold the value
        for target in flat:
            if isinstance(target, ast.Name):
                locals_.append(target.id)
                continue
            self.lvalue(target)  # the lvalue's own reads: a subscript indexes (out[slot] = ...)
            root = root_name(target)
            if root is None:
                continue
            (stored if root in self.memory else locals_).append(root)
        if node.value is None:
            return
        # a value assigned to locals only is a flow, not a use of its own
        kind = VALUE if stored else None
        if isinstance(node, ast.AugAssign) and not isinstance(node.op, _ADDITIVE_OPS):
            # `p *= k`: the adjoint of the product reads k to differentiate p
            root = root_name(node.target)
            self.expr(node.value, FACTOR, (root,) if root else ())
        else:
            self.expr(node.value, kind, tuple(stored))
        self.flow(node.value, locals_)

    def lvalue(self, target: ast.expr) -> None:
        node = target
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            if isinstance(node, ast.Subscript):
                base = root_name(node.value)
                self.expr(node.slice, INDEX, (base,) if base else ())
            node = node.value

    def flow(self, value: ast.expr, targets: list[str]) -> None:
        if not targets:
            return
        for name in names_in(value):
            self.flows.setdefault(name, set()).update(targets)
        for sub in walk(value):
            if id(sub) in self.sources:
                self.call_flows.setdefault(id(sub), set()).update(targets)

    # ------------------------------------------------------------ expressions

    def expr(self, node: ast.expr, kind: str | None, partners: tuple[str, ...]) -> None:
        if isinstance(node, ast.Name):
            if kind is not None and isinstance(node.ctx, ast.Load):
                self.sites.append((kind, node.id, partners))
        elif isinstance(node, ast.Subscript):
            self.expr(node.value, kind, partners)
            base = root_name(node.value)
            self.expr(node.slice, INDEX, (base,) if base else ())
        elif isinstance(node, ast.Call):
            self.call(node, kind, partners)
        elif isinstance(node, ast.BinOp):
            if isinstance(node.op, _ADDITIVE_OPS):
                self.expr(node.left, kind, partners)
                self.expr(node.right, kind, partners)
            else:
                self.operands([node.left, node.right], kind, partners)
        elif isinstance(node, ast.IfExp):
            self.expr(node.test, BRANCH, ())
            self.expr(node.body, kind, partners)
            self.expr(node.orelse, kind, partners)
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.expr(child, kind, partners)

    def call(self, node: ast.Call, kind: str | None, partners: tuple[str, ...]) -> None:
        if id(node) in self.sources and kind is not None:
            self.sites.append((kind, id(node), partners))
        name = call_name(node.func)
        args = list(node.args)
        keywords = [k.value for k in node.keywords]
        if name.startswith("atomic_") and args:
            array = root_name(args[0])
            indexes = atomic_index_args(node)
            self.expr(args[0], kind, partners)
            for arg in indexes:
                self.expr(arg, INDEX, (array,) if array else ())
            for arg in args[1 + len(indexes) :] + keywords:
                self.expr(arg, kind, partners)
        elif name in _SELECTS and len(args) == 3:
            self.expr(args[0], BRANCH, ())
            self.expr(args[1], kind, partners)
            self.expr(args[2], kind, partners)
        elif name in _LINEAR:
            for arg in args + keywords:
                self.expr(arg, kind, partners)
        else:
            self.operands(args + keywords, kind, partners)

    def operands(self, operands: list[ast.expr], kind: str | None, partners: tuple[str, ...]) -> None:
        """Operands of an operation whose adjoint reads each operand to differentiate the
        others (``*``, ``/``, ``wp.min``, a user function): each is a factor of the others."""
        names = [names_in(operand) for operand in operands]
        for position, operand in enumerate(operands):
            others = set().union(*(n for i, n in enumerate(names) if i != position))
            if others and _RANK[kind] < _RANK[FACTOR]:
                self.expr(operand, FACTOR, tuple(sorted(others)))
            else:
                self.expr(operand, kind, partners)


def _flat(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return [t for element in target.elts for t in _flat(element)]
    return [target]
