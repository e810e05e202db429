"""What the adjoint's replay of a function sees after a loop Warp does not unroll.

Before it runs the adjoint statements of a kernel or a ``@wp.func``, Warp recomputes the
forward values of the body (the "replay"), and the replay skips every dynamic loop (one
Warp does not unroll: see :class:`~warptrace.kernel_source.facts.Loop`). Every local such a
loop changes therefore holds, for every adjoint statement after the loop, the value it had
*before* the loop (zero for a local the loop defines). Verified on Warp 1.19:
``s = 1; for j in range(n): s += a[j]`` then ``out = s * c`` gives ``c.grad = 1`` instead
of the sum; ``out = s * s`` gives ``a.grad = 2`` instead of ``2 * sum``; ``total / norm``
gives NaN (``norm`` is still 0). The replay of a *call* runs the called function for real,
loops included, so a value returned by a ``@wp.func`` is exact in the caller.

:func:`stale_uses` walks one body in statement order and tells which statements read a
stale local (one changed by an earlier dynamic loop, or computed from one) in a way whose
adjoint needs its value: a product with something else that carries a gradient, a division,
a nonlinear function, a branch condition, an index. Sums, differences, scaling by a
constant, stores and returns of the stale value are exact and are not reported.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace

from warptrace.kernel_source.local_flow import value_names
from warptrace.kernel_source.syntax import call_name, constructs_value, names_in, root_name, walk

__all__ = ["StaleRead", "stale_reads", "stale_uses"]

# calls linear in each argument (their adjoint never needs an argument's value)
_LINEAR_CALLS = frozenset(
    (
        "float", "float16", "float32", "float64", "add", "sub", "neg", "pos", "transpose", "spatial_top",
        "spatial_bottom", "transform_get_translation", "transform_get_rotation", "atomic_add",
        "atomic_sub", "extract", "tile", "untile", "tile_sum", "tile_transpose", "tile_broadcast",
        "tile_reshape", "tile_squeeze", "tile_view", "tile_store", "tile_atomic_add",
    )
)  # fmt: skip
_BILINEAR_CALLS = frozenset(("mul", "dot", "cross", "outer", "cw_mul", "ddot"))
# calls whose result carries no gradient: integer casts, thread ids, sizes, step functions
_CONSTANT_CALLS = frozenset(
    (
        "int", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "tid", "len",
        "round", "rint", "floor", "ceil", "trunc", "sign", "step", "nonzero", "bool", "isnan", "isinf",
        "isfinite", "static",
    )
)  # fmt: skip
_SELECTS = ("where", "select")


@dataclass(frozen=True)
class StaleRead:
    """A statement after a dynamic loop whose adjoint needs the value of a stale local.

    Lines are relative to the parsed tree (``function_facts`` makes them absolute)."""

    line: int
    loop: int  # the dynamic loop that changed the first of ``names``
    names: tuple[str, ...]  # the stale locals the statement reads
    # names whose adjoint is computed from the stale value: the statement's gradient is wrong
    # when one of them carries a gradient
    needs: tuple[str, ...]
    kind: str  # "value" (a product, quotient, function of it) or "branch" (a condition, a loop bound)
    # array parameters the loop runs only when non-null (``if joint_qdd: for j in ...``)
    guards: tuple[str, ...] = ()


@dataclass
class _Origin:
    loop: int
    guards: tuple[str, ...]


@dataclass
class _Found:
    loop: int
    names: set[str] = field(default_factory=set)
    needs: set[str] = field(default_factory=set)
    guards: tuple[str, ...] = ()


def stale_uses(tree: ast.FunctionDef, dynamic: set[int], arrays: set[str]) -> tuple[StaleRead, ...]:
    """The statements of ``tree`` whose adjoint needs a local that a dynamic loop changed.

    ``dynamic``: the (tree-relative) lines of the loops Warp does not unroll; ``arrays``:
    the names bound to arrays (parameters, local views), which are memory, not values."""
    walker = _Replay(dynamic, arrays, {a.arg for a in tree.args.args})
    walker.block(tree.body, {})
    return tuple(
        StaleRead(
            line, found.loop, tuple(sorted(found.names)), tuple(sorted(found.needs)), kind, found.guards
        )
        for (line, kind), found in sorted(walker.found.items())
    )


State = dict[str, _Origin]


def stale_reads(
    tree: ast.FunctionDef, dynamic_lines: list[int], offset: int, arrays: set[str] | frozenset[str]
) -> tuple[StaleRead, ...]:
    """:func:`stale_uses` of ``tree`` (whose absolute lines are its own plus ``offset``), with
    the dynamic loops at the absolute lines ``dynamic_lines``; the reads with absolute lines."""
    dynamic = {line - offset for line in dynamic_lines}
    if not dynamic:
        return ()
    return tuple(
        replace(read, line=read.line + offset, loop=read.loop + offset)
        for read in stale_uses(tree, dynamic, set(arrays))
    )


def _merge(left: State, right: State) -> State:
    out = dict(left)
    for name, origin in right.items():
        out.setdefault(name, origin)
    return out


class _Replay:
    def __init__(self, dynamic: set[int], arrays: set[str], params: set[str]) -> None:
        self.dynamic = dynamic
        self.arrays = arrays
        self.params = params
        self.found: dict[tuple[int, str], _Found] = {}
        self.tests: list[ast.expr] = []  # enclosing if tests, innermost last

    # ------------------------------------------------------------ statements

    def block(self, body: list[ast.stmt], stale: State) -> State:
        for stmt in body:
            stale = self.stmt(stmt, stale)
        return stale

    def stmt(self, node: ast.stmt, stale: State) -> State:
        if isinstance(node, (ast.For, ast.While)):
            return self.loop(node, stale)
        if isinstance(node, ast.If):
            self.branch(node, node.test, node.body + node.orelse, stale)
            self.tests.append(node.test)
            left = self.block(node.body, dict(stale))
            self.tests.pop()
            right = self.block(node.orelse, dict(stale))
            return _merge(left, right)
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            if node.value is None:
                return stale
            self.expr_use(node, node.value, stale)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            read = self.reads(node.value, stale)
            for target in targets:
                self.assign(node, target, read, stale, augmented=False)
            return stale
        if isinstance(node, ast.AugAssign):
            self.aug_assign(node, stale)
            return stale
        if isinstance(node, ast.Expr):
            self.expr_use(node, node.value, stale)
            return stale
        if isinstance(node, ast.Return) and node.value is not None:
            self.expr_use(node, node.value, stale)
        return stale

    def loop(self, node: ast.For | ast.While, stale: State) -> State:
        if isinstance(node, ast.For):
            # the bounds of a dynamic loop are recomputed by the replay: stale bounds run the
            # reverse iterations over the wrong range
            if node.lineno in self.dynamic:
                self.branch(node, node.iter, node.body, stale)
            target = names_in(node.target)
        else:
            target = set()
        inner = dict(stale)
        for name in target:
            inner.pop(name, None)
        # twice: staleness reaches the locals the body carries from one iteration to the next
        inner = self.block(node.body, inner)
        inner = self.block(node.body, _merge(stale, inner))
        after = _merge(stale, inner)
        for name in target:
            after.pop(name, None)
        if node.lineno in self.dynamic:
            origin = _Origin(node.lineno, self.guards())
            assigned = {
                root
                for stmt in node.body
                for sub in walk(stmt)
                if isinstance(sub, ast.stmt)
                for root in _assigned_roots(sub)
            }
            for name in assigned - target - self.arrays:
                after[name] = origin
        return self.block(node.orelse, after)

    def aug_assign(self, node: ast.AugAssign, stale: State) -> None:
        target = node.target
        value_read = self.reads(node.value, stale)
        needs, kind = self.needs(node.value, stale)
        target_read = self.reads(target, stale) if not isinstance(target, ast.Name) else set()
        if isinstance(target, ast.Name) and target.id in stale:
            target_read = {target.id}
        if not isinstance(node.op, (ast.Add, ast.Sub)):
            # x *= e, x /= e: the adjoint of x needs e and the adjoint of e needs x
            if target_read and not _constant(node.value):
                needs |= _names(node.value)
            if value_read:
                needs |= _names(target) if not isinstance(target, ast.Name) else {target.id}
            if isinstance(node.op, ast.Div) and value_read:
                needs |= _names(node.value)
        needs |= self.index_needs(target, stale, node.value)
        self.report(node.lineno, needs, "value", stale, value_read | target_read)
        if kind:
            self.report(node.lineno, kind[1], "branch", stale, value_read)
        self.assign(node, target, value_read | target_read, stale, augmented=True)

    def assign(self, node: ast.stmt, target: ast.expr, read: set[str], stale: State, augmented: bool) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.assign(node, element, read, stale, augmented)
            return
        root = root_name(target)
        if root is None or root in self.arrays or self.is_field(target):
            if not isinstance(node, ast.AugAssign):
                needs = self.index_needs(target, stale, getattr(node, "value", None))
                self.report(node.lineno, needs, "value", stale, self.reads(target, stale))
            return
        if read:
            stale[root] = stale[min(read, key=lambda n: stale[n].loop)]
        elif isinstance(target, ast.Name) and not augmented:
            stale.pop(root, None)  # recomputed from values the replay has right

    def index_needs(self, target: ast.expr, stale: State, value: ast.expr | None) -> set[str]:
        """``a[k] = v`` with a stale ``k``: the adjoint reads ``a``'s gradient at the wrong element."""
        needs: set[str] = set()
        for sub in walk(target):
            if isinstance(sub, ast.Subscript) and self.reads(sub.slice, stale):
                needs |= _names(value) if value is not None else set()
                root = root_name(sub)
                if root is not None:
                    needs.add(root)
        return needs

    def branch(self, node: ast.stmt, test: ast.expr, body: list[ast.stmt], stale: State) -> None:
        read = self.reads(test, stale)
        if not read:
            return
        needs: set[str] = set()
        for stmt in body:
            needs |= _names(stmt)
            needs |= {
                root for sub in walk(stmt) if isinstance(sub, ast.stmt) for root in _assigned_roots(sub)
            }
        self.report(node.lineno, needs, "branch", stale, read)

    def expr_use(self, node: ast.stmt, value: ast.expr, stale: State) -> None:
        read = self.reads(value, stale)
        if not read:
            return
        needs, branch = self.needs(value, stale)
        self.report(node.lineno, needs, "value", stale, read)
        if branch:
            self.report(node.lineno, branch[1], "branch", stale, branch[0])

    def report(self, line: int, needs: set[str], kind: str, stale: State, read: set[str]) -> None:
        names = {n for n in read if n in stale}
        if not needs or not names:
            return
        first = min(names, key=lambda n: (stale[n].loop, n))
        origin = stale[first]
        found = self.found.setdefault((line, kind), _Found(origin.loop, guards=origin.guards))
        if {stale[n].loop for n in names} != {origin.loop}:
            found.guards = ()  # several loops: the finding stands unless every one is skipped
        found.names |= names
        found.needs |= needs - {"wp", "warp"}

    # ------------------------------------------------------------ expressions

    def reads(self, node: ast.AST, stale: State) -> set[str]:
        return {n.id for n in walk(node) if isinstance(n, ast.Name) and n.id in stale}

    def is_field(self, node: ast.expr) -> bool:
        """``state.q[i]``: an array reached through a struct parameter."""
        inner = node
        while isinstance(inner, ast.Subscript):
            inner = inner.value
        return isinstance(inner, ast.Attribute) and root_name(inner) in self.params

    def is_array(self, node: ast.expr) -> bool:
        root = root_name(node)
        return root is not None and (root in self.arrays or self.is_field(node))

    def needs(self, node: ast.expr, stale: State) -> tuple[set[str], tuple[set[str], set[str]] | None]:
        """(names whose adjoint needs a stale value read in ``node``, (stale names, names under
        a stale condition) of a ``wp.where``/conditional expression, or None)."""
        needs: set[str] = set()
        branch: list[tuple[set[str], set[str]]] = []
        self._needs(node, stale, needs, branch)
        if not branch:
            return needs, None
        return needs, (set().union(*(b[0] for b in branch)), set().union(*(b[1] for b in branch)))

    def _needs(self, node: ast.expr, stale: State, out: set[str], branch: list) -> None:
        if not self.reads(node, stale):
            return
        if isinstance(node, ast.BinOp):
            self._needs(node.left, stale, out, branch)
            self._needs(node.right, stale, out, branch)
            left, right = self.reads(node.left, stale), self.reads(node.right, stale)
            if isinstance(node.op, (ast.Add, ast.Sub)):
                return
            if isinstance(node.op, (ast.Mult, ast.MatMult)):
                if left and not _constant(node.right):
                    out |= _names(node.right)
                if right and not _constant(node.left):
                    out |= _names(node.left)
                return
            if isinstance(node.op, ast.Div):
                if left and not _constant(node.right):
                    out |= _names(node.right)
                if right:
                    out |= _names(node.left) | _names(node.right)
                return
            out |= _names(node.left) | _names(node.right)
            return
        if isinstance(node, ast.UnaryOp):
            self._needs(node.operand, stale, out, branch)
            return
        if isinstance(node, ast.IfExp):
            self._select(node.test, (node.body, node.orelse), stale, out, branch)
            return
        if isinstance(node, (ast.Compare, ast.BoolOp)):
            return  # a condition: zero derivative; its use decides (branch, select)
        if isinstance(node, ast.Subscript):
            if self.reads(node.slice, stale):
                root = root_name(node)
                if root is not None:
                    out.add(root)  # the adjoint lands on the wrong element or component
            if not self.is_array(node):
                self._needs(node.value, stale, out, branch)
            return
        if isinstance(node, (ast.Tuple, ast.List)):
            for element in node.elts:
                self._needs(element, stale, out, branch)
            return
        if isinstance(node, ast.Call):
            self._call(node, stale, out, branch)
            return
        if isinstance(node, (ast.Name, ast.Attribute, ast.Constant)):
            return
        out |= _names(node)

    def _call(self, node: ast.Call, stale: State, out: set[str], branch: list) -> None:
        name = call_name(node.func)
        args = list(node.args) + [k.value for k in node.keywords]
        if name in _CONSTANT_CALLS:
            return
        if name in _SELECTS and len(node.args) == 3:
            self._select(node.args[0], (node.args[1], node.args[2]), stale, out, branch)
            return
        if name in ("atomic_add", "atomic_sub") and len(node.args) >= 2:
            *head, last = node.args
            if any(self.reads(a, stale) for a in head[1:]):
                out |= _names(last) | {root_name(head[0]) or ""}
            self._needs(last, stale, out, branch)
            return
        if name in _LINEAR_CALLS or constructs_value(name):
            for arg in args:
                self._needs(arg, stale, out, branch)
            return
        if name in _BILINEAR_CALLS:
            for index, arg in enumerate(args):
                self._needs(arg, stale, out, branch)
                if self.reads(arg, stale):
                    for other_index, other in enumerate(args):
                        if other_index != index and not _constant(other):
                            out |= _names(other)
            return
        # a nonlinear builtin or a user function: its adjoint evaluates it at the stale value
        for arg in args:
            self._needs(arg, stale, out, branch)
            out |= _names(arg)

    def _select(
        self, test: ast.expr, operands: tuple[ast.expr, ...], stale: State, out: set[str], branch: list
    ) -> None:
        for operand in operands:
            self._needs(operand, stale, out, branch)
        read = self.reads(test, stale)
        if read:
            branch.append((read, set().union(*(_names(o) for o in operands))))

    def guards(self) -> tuple[str, ...]:
        """Array parameters an enclosing ``if`` tests for null (``if arr:``, ``if arr and ...:``)."""
        found: set[str] = set()
        for test in self.tests:
            parts = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
            for part in parts:
                if isinstance(part, ast.Name) and part.id in self.arrays and part.id in self.params:
                    found.add(part.id)
        return tuple(sorted(found))


def _assigned_roots(stmt: ast.stmt) -> set[str]:
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        targets = [stmt.target]
    out = set()
    for target in targets:
        for sub in walk(target):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                out.add(sub.id)
        root = root_name(target)
        if root is not None:
            out.add(root)
    return out


def _names(node: ast.AST) -> set[str]:
    """Names a value reads, without the names of called functions."""
    return set(value_names(node))


def _constant(node: ast.expr) -> bool:
    """A literal (or arithmetic of literals): scaling by it is linear."""
    return all(not isinstance(n, ast.Name) for n in walk(node)) and not any(
        isinstance(n, ast.Call) for n in walk(node)
    )
