"""Plain, JSON-serializable facts about one function body (a kernel, a ``@wp.func``,
a ``@wp.func_grad`` or a ``@wp.func_replay``), computed from its source once.

Every line number is an absolute line of the file the function lives in. These are the
syntax facts the kernel-source rules (WT401-WT408) are built on; see
:class:`FunctionFacts` for the list and :func:`function_facts` for how they are made.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace

from warptrace.kernel_source import guards, local_flow, replay, result_uses, unroll
from warptrace.kernel_source.replay import StaleRead
from warptrace.kernel_source.syntax import call_name, names_in, parse_function, root_name, text_of, walk

__all__ = [
    "AdjointAssign",
    "AtomicCall",
    "AugAssign",
    "Call",
    "Comparison",
    "ComponentAssign",
    "Division",
    "FunctionFacts",
    "FunctionSource",
    "Loop",
    "Select",
    "StaleRead",
    "Statement",
    "function_facts",
]

# Roles of a function in a kernel's call tree.
KERNEL, FUNC, FUNC_GRAD, FUNC_REPLAY = "kernel", "func", "func_grad", "func_replay"


@dataclass(frozen=True)
class FunctionSource:
    """Where a function body comes from: what the recorder gathers (from Warp objects)."""

    role: str  # KERNEL, FUNC, FUNC_GRAD or FUNC_REPLAY
    name: str  # kernel key / function key
    file: str
    line: int  # absolute line of the `def` (-1 unknown)
    source: str  # source text starting with the decorators
    of: str = ""  # for FUNC_GRAD / FUNC_REPLAY: the key of the function it belongs to
    # Integer values of the global/closure names the function refers to (``N = wp.constant(8)``):
    # Warp evaluates them when it decides whether a ``range(N)`` loop is unrolled.
    constants: tuple[tuple[str, int], ...] = ()
    # The module option ``max_unroll`` the kernel is compiled with (callees inherit it).
    max_unroll: int = 16


@dataclass(frozen=True)
class Statement:
    """One statement (compound statements included), innermost loop first."""

    line: int
    end_line: int
    kind: str  # the ast class name: "Assign", "AugAssign", "For", "If", "Return", ...
    loop: int  # line of the innermost enclosing loop, -1 outside loops


@dataclass(frozen=True)
class Loop:
    """A ``for`` or ``while`` loop. Warp unrolls a ``for ... in range(...)`` whose bounds are
    compile-time constants (up to ``max_unroll`` iterations); every other loop is dynamic and
    is not replayed by the adjoint (its locals hold their final values in backward)."""

    line: int
    end_line: int
    kind: str  # "for" or "while"
    target: str  # loop variable text ("" for while)
    iterator: str  # "range(n)", "wp.range(0, 4)", ... ("" for while)
    bounds: tuple[str, ...]  # range(...) argument texts, () when not a range
    trip_count: int | None  # known from integer literals in range(...), else None
    assigned: tuple[str, ...]  # local names (re)bound in the body, sorted
    parent: int  # line of the enclosing loop, -1
    # Warp unrolls it: ``range(...)`` (the builtin name) with constant bounds, a trip count up to
    # ``max_unroll`` (any count when the body holds ``wp.static``), no ``break``. Every other loop
    # is dynamic: the adjoint replays each iteration's body from the locals' final values.
    unrolled: bool = False
    # Locals carried from one iteration to the next (read in the body before the body assigns
    # them) whose update is not purely additive (``p *= x``, ``y = f(y)``, ``s = s * a + b``): in a
    # dynamic loop their adjoint uses the final value instead of each iteration's.
    carried: tuple[str, ...] = ()
    carried_lines: tuple[int, ...] = ()  # per carried local, the line to change
    # per carried local: "value" (used in a product/recurrence) or "branch" (only a branch
    # condition reads it: an argmin search; the replay takes branches from the final value)
    carried_kinds: tuple[str, ...] = ()


@dataclass(frozen=True)
class AugAssign:
    """``target op= value``. ``target_kind``: "array" (an element of an array parameter or
    one of its fields: ``a[i] *= s``, ``state.q[i] += v``, ``a[i].x -= v``), "local" (a plain
    name: ``p *= x``), "component" (a component of a local vector/matrix: ``v[0] += a``,
    ``v.x *= 2``), "other" (anything else)."""

    line: int
    op: str  # "+=", "-=", "*=", "/=", ...
    target: str
    target_kind: str
    root: str  # root name of the target
    value: str
    loop: int  # innermost enclosing loop line, -1
    names: tuple[str, ...] = ()  # names the value reads (plus the target's root)


@dataclass(frozen=True)
class ComponentAssign:
    """A component of a local value assigned: ``v[0] = a``, ``v.x = a``, ``m[i, j] = a``
    (``op`` "=" ), or updated (``op`` "+=", ...)."""

    line: int
    local: str  # the local name
    component: str  # "[0]", ".x", "[i, j]"
    op: str
    loop: int
    # What this assignment overwrites, when that value is computed from names: "assigned"
    # (an earlier assignment of the same component, or this one repeated by a loop over a
    # component that does not follow the loop variable), "initialized" (the local's
    # whole-value assignment, e.g. `p = x[i]`), or "" (a constant, or nothing before).
    previous: str = ""
    previous_line: int = -1
    previous_names: tuple[str, ...] = ()  # the names the overwritten value reads


@dataclass(frozen=True)
class Select:
    """``wp.where(c, a, b)``, ``wp.select(c, a, b)`` or ``a if c else b``. For the calls both
    operands are evaluated and both adjoints run; a real ``if`` (``kind`` "ifexp" is Python's
    conditional expression, which Warp also evaluates on both sides) does not."""

    line: int
    kind: str  # "where", "select" or "ifexp"
    condition: str
    operands: tuple[str, ...]
    operand_calls: tuple[tuple[str, ...], ...]  # call names inside each operand (sorted)
    # per operand, the unguarded operations that can give a non-finite value or adjoint:
    # "exp", "log", "sqrt", "pow", "/", ... (see :func:`_hazards`)
    hazards: tuple[tuple[str, ...], ...] = ()
    operand_names: tuple[tuple[str, ...], ...] = ()  # names each operand reads


@dataclass(frozen=True)
class Call:
    """A call: ``name`` is the last part of the called name (``wp.sqrt`` -> ``sqrt``)."""

    line: int
    name: str
    func: str  # the called expression as written ("wp.sqrt", "helper")
    args: tuple[str, ...]
    result_used: bool  # False when the call is a statement of its own
    loop: int
    arg_names: tuple[tuple[str, ...], ...] = ()  # names read by each positional argument
    # the first argument cannot be zero by construction: ``wp.max(x, eps)``, ``x + eps``,
    # ``wp.clamp(x, lo, hi)`` with a nonzero bound, a nested ``wp.where``/``wp.select``
    arg_guarded: bool = False
    # names tested by the enclosing ``if``/``while`` conditions and by earlier early exits
    # (``if d < eps: return``) in the enclosing blocks
    guards: tuple[str, ...] = ()


@dataclass(frozen=True)
class Division:
    """``a / b``, ``a // b``, ``a % b`` or ``a /= b``: finite forward, infinite adjoint when the
    denominator can be zero."""

    line: int
    op: str  # "/", "//", "%" or "/="
    numerator: str
    denominator: str
    loop: int


@dataclass(frozen=True)
class Comparison:
    """A comparison (``a < b``, ``a == b``, ...): piecewise constant, zero derivative."""

    line: int
    text: str
    loop: int
    # turned into a number (``float(x > 0)``, ``(x > 0) * w``), not only a condition or a flag
    # (an ``if``/``while`` test, a ``wp.where`` condition, ``inside = a < b`` used in branches)
    as_value: bool = False
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class AdjointAssign:
    """In a custom adjoint: ``wp.adjoint[x] = ...`` (``op`` "=", overwrites what other uses
    of ``x`` contributed) or ``wp.adjoint[x] += ...`` (accumulates, correct)."""

    line: int
    variable: str
    op: str


@dataclass(frozen=True)
class AtomicCall:
    """``wp.atomic_*`` call; ``result_used`` when the kernel uses the returned old value
    (a counter handing out slots) rather than only accumulating; ``uses``: how (``(kind,
    partner names)``, strongest first: index, branch, factor, value, see
    :mod:`warptrace.kernel_source.result_uses`); ``returned``: a ``return`` hands it to the
    callers. Models stored by older versions have no ``uses`` (unknown)."""

    line: int
    name: str
    array: str  # first argument text
    result_used: bool
    loop: int
    uses: tuple[tuple[str, tuple[str, ...]], ...] = ()
    returned: bool = False


@dataclass(frozen=True)
class FunctionFacts:
    """Syntax facts of one function body. ``parsed`` is False when the source was missing or
    not parseable; then every list is empty and rules must answer conservatively."""

    role: str
    name: str
    file: str
    line: int
    of: str
    parsed: bool
    source: str = ""  # the text the facts were computed from (decorators included)
    params: tuple[str, ...] = ()
    array_params: tuple[str, ...] = ()  # parameters annotated as arrays
    statements: tuple[Statement, ...] = ()
    loops: tuple[Loop, ...] = ()
    aug_assigns: tuple[AugAssign, ...] = ()
    component_assigns: tuple[ComponentAssign, ...] = ()
    selects: tuple[Select, ...] = ()
    calls: tuple[Call, ...] = ()
    divisions: tuple[Division, ...] = ()
    comparisons: tuple[Comparison, ...] = ()
    adjoint_assigns: tuple[AdjointAssign, ...] = ()
    atomics: tuple[AtomicCall, ...] = ()
    lines: tuple[int, int] = field(default=(-1, -1))  # absolute (first, last) line of the source
    # def-use of locals: each name assigned in the body with the names its values are computed
    # from (every assignment, flow-insensitive), to tell which parameters a value depends on
    deps: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # the integer module constants the body refers to (FunctionSource.constants): the values
    # Warp compiled in (``N`` in ``/ float(N)``)
    constants: tuple[tuple[str, int], ...] = ()
    # statements after a dynamic loop whose adjoint needs a local the loop changed: the replay
    # skips the loop, so they see its value from before the loop (see :mod:`.replay`)
    stale_reads: tuple[StaleRead, ...] = ()


_OPS = {
    ast.Add: "+=", ast.Sub: "-=", ast.Mult: "*=", ast.Div: "/=", ast.FloorDiv: "//=", ast.Mod: "%=",
    ast.Pow: "**=", ast.BitAnd: "&=", ast.BitOr: "|=", ast.BitXor: "^=", ast.LShift: "<<=",
    ast.RShift: ">>=", ast.MatMult: "@=",
}  # fmt: skip


def function_facts(function: FunctionSource) -> FunctionFacts:
    """Parse ``function.source`` and collect its facts (see :class:`FunctionFacts`)."""
    tree = parse_function(function.source)
    if tree is None:
        return FunctionFacts(
            function.role,
            function.name,
            function.file,
            function.line,
            function.of,
            False,
            function.source,
            constants=function.constants,
        )
    collector = _Collector(tree, function.line, dict(function.constants), function.max_unroll)
    if function.role != KERNEL:  # a function's parameters vary per call, a kernel's scalars do not
        collector.per_thread |= collector.params
    collector.block(tree.body, -1)
    _add_result_uses(collector, tree)
    first = collector.absolute(tree) - (tree.lineno - 1)
    n_lines = len(function.source.splitlines())
    history = local_flow.component_history(tree)
    offset = collector.absolute(tree) - tree.lineno
    components = []
    for item in collector.components:
        previous = history.get((item.line - offset, item.local, item.component))
        if previous is not None:
            item = replace(
                item, previous=previous[0], previous_line=previous[1] + offset, previous_names=previous[2]
            )
        components.append(item)
    return FunctionFacts(
        role=function.role,
        name=function.name,
        file=function.file,
        line=function.line,
        of=function.of,
        parsed=True,
        source=function.source,
        params=tuple(a.arg for a in tree.args.args),
        array_params=tuple(sorted(collector.array_params)),
        statements=tuple(collector.statements),
        loops=tuple(collector.loops),
        aug_assigns=tuple(collector.aug_assigns),
        component_assigns=tuple(components),
        selects=tuple(collector.selects),
        calls=tuple(collector.calls),
        divisions=tuple(collector.divisions),
        comparisons=tuple(collector.comparisons),
        adjoint_assigns=tuple(collector.adjoint_assigns),
        atomics=tuple(collector.atomics),
        lines=(first, first + n_lines - 1),
        deps=local_flow.local_deps(tree),
        constants=function.constants,
        stale_reads=replay.stale_reads(
            tree,
            [loop.line for loop in collector.loops if not loop.unrolled],
            offset,
            collector.array_params | collector.array_locals,
        ),
    )


def _add_result_uses(collector: _Collector, tree: ast.FunctionDef) -> None:
    """Fill in how the function uses what its atomics return."""
    if not any(a.result_used for a in collector.atomics):
        return
    memory = collector.params | collector.array_locals
    found = result_uses.result_uses(tree, collector.atomic_nodes, memory)
    collector.atomics = [
        replace(atomic, uses=found[id(node)].uses, returned=found[id(node)].returned)
        for atomic, node in zip(collector.atomics, collector.atomic_nodes)
    ]


def _is_array_annotation(node: ast.expr | None) -> bool:
    return local_flow.array_annotation_ndim(node) is not None


class _Collector:
    """One pass over a function body collecting every fact list."""

    def __init__(
        self, tree: ast.FunctionDef, def_line: int, constants: dict[str, int], max_unroll: int
    ) -> None:
        self.def_lineno = tree.lineno
        self.def_line = def_line
        self.constants = constants
        self.max_unroll = max_unroll
        self.assigned = names_assigned(tree)
        self.per_thread = set(self.assigned)
        self.safe = guards.safe_locals(tree, self.assigned)
        # names tested by enclosing if/while conditions and earlier early exits (see Call.guards)
        self.guard_stack: list[set[str]] = []
        self.params = {a.arg for a in tree.args.args}
        self.array_params = {a.arg for a in tree.args.args if _is_array_annotation(a.annotation)}
        # locals bound to an array view: `y_slice[0, i] = v` stores into the array
        self.array_locals = local_flow.array_locals(tree)
        self.tile_locals = local_flow.tile_locals(tree)
        self.statements: list[Statement] = []
        self.loops: list[Loop] = []
        self.aug_assigns: list[AugAssign] = []
        self.components: list[ComponentAssign] = []
        self.selects: list[Select] = []
        self.calls: list[Call] = []
        self.divisions: list[Division] = []
        self.comparisons: list[Comparison] = []
        self.adjoint_assigns: list[AdjointAssign] = []
        self.atomics: list[AtomicCall] = []
        self.atomic_nodes: list[ast.Call] = []  # the node of each atomic, for result_uses

    def absolute(self, node: ast.AST) -> int:
        lineno = getattr(node, "lineno", self.def_lineno)
        if self.def_line < 0:
            return lineno
        return self.def_line + lineno - self.def_lineno

    def block(self, body: list[ast.stmt], loop: int) -> None:
        pushed = 0
        for stmt in body:
            self.stmt(stmt, loop)
            if isinstance(stmt, ast.If) and _exits(stmt.body):
                # `if d < eps: return`: what follows in this block runs only when the test failed
                self.guard_stack.append(names_in(stmt.test))
                pushed += 1
        if pushed:
            del self.guard_stack[-pushed:]

    def stmt(self, node: ast.stmt, loop: int) -> None:
        line = self.absolute(node)
        end = (
            self.def_line + (node.end_lineno or node.lineno) - self.def_lineno
            if self.def_line >= 0
            else (node.end_lineno or node.lineno)
        )
        self.statements.append(Statement(line, end, type(node).__name__, loop))
        if isinstance(node, (ast.For, ast.While)):
            self.loop(node, line, end, loop)
            return
        if isinstance(node, ast.AugAssign):
            self.aug_assign(node, line, loop)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                self.assign_target(target, "=", line, loop)
        # expressions of this statement (not of nested statements)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, loop, used=not isinstance(node, ast.Expr))
        if isinstance(node, ast.If):
            self.guard_stack.append(names_in(node.test))
        for name in ("body", "orelse", "finalbody"):
            nested = getattr(node, name, None)
            if isinstance(nested, list) and nested and isinstance(nested[0], ast.stmt):
                self.block(nested, loop)
        if isinstance(node, ast.If):
            self.guard_stack.pop()

    def loop(self, node: ast.For | ast.While, line: int, end: int, parent: int) -> None:
        assigned = sorted(
            {
                n.id
                for s in node.body
                for n in walk(s)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
            }
        )
        # a scaling by what is the same in every iteration (literals, module constants, a
        # kernel's scalar arguments) is linear: `p *= 0.99` in a dynamic loop replays exactly
        varying = frozenset(self.per_thread | self.array_params | self.array_locals | self.tile_locals)
        carried, carried_lines, carried_kinds = local_flow.carried_state(node, varying)
        # an array (parameter or local alias) is memory, not a value the replay carries:
        # `a[k] = a.dtype(...)` reads and writes the name `a` in every iteration
        arrays = self.array_params | self.array_locals
        if arrays & set(carried):
            kept = [i for i, name in enumerate(carried) if name not in arrays]
            carried = tuple(carried[i] for i in kept)
            carried_lines = tuple(carried_lines[i] for i in kept)
            carried_kinds = tuple(carried_kinds[i] for i in kept)
        offset = line - node.lineno
        carried_at = tuple(n + offset for n in carried_lines)
        if isinstance(node, ast.For):
            bounds, trips = unroll.range_bounds(node.iter, self.constants)
            self.loops.append(
                Loop(
                    line,
                    end,
                    "for",
                    text_of(node.target),
                    text_of(node.iter),
                    bounds,
                    trips,
                    tuple(assigned),
                    parent,
                    unroll.unrolled(node, trips, self.max_unroll, self.constants),
                    carried,
                    carried_at,
                    carried_kinds,
                )
            )
            self.expr(node.iter, parent, used=True)
            self.block(node.body, line)
        else:
            self.loops.append(
                Loop(
                    line, end, "while", "", "", (), None, tuple(assigned), parent, False, carried, carried_at
                )
            )
            self.expr(node.test, line, used=True)
            self.guard_stack.append(names_in(node.test))
            self.block(node.body, line)
            self.guard_stack.pop()
        self.block(node.orelse, parent)

    def target_kind(self, target: ast.expr) -> str:
        root = root_name(target)
        if isinstance(target, ast.Name):
            return "local"
        if root is None:
            return "other"
        if root in self.params or root in self.array_locals:
            return "array" if self.reaches_array(target) else "other"
        return "component"

    def reaches_array(self, target: ast.expr) -> bool:
        # a[i], a[i].x, state.q[i]: a subscript somewhere in the chain of a parameter
        node = target
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            if isinstance(node, ast.Subscript):
                return True
            node = node.value
        return False

    def aug_assign(self, node: ast.AugAssign, line: int, loop: int) -> None:
        op = _OPS.get(type(node.op), "?=")
        root = root_name(node.target) or ""
        kind = self.target_kind(node.target)
        names = tuple(sorted(names_in(node.value) | ({root} if root else set())))
        self.aug_assigns.append(
            AugAssign(line, op, text_of(node.target), kind, root, text_of(node.value), loop, names)
        )
        if op == "/=":
            self.divisions.append(Division(line, op, text_of(node.target), text_of(node.value), loop))
        self.assign_target(node.target, op, line, loop)

    def assign_target(self, target: ast.expr, op: str, line: int, loop: int) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.assign_target(element, op, line, loop)
            return
        if isinstance(target, ast.Subscript) and call_name(target.value) == "adjoint":
            self.adjoint_assigns.append(AdjointAssign(line, text_of(target.slice), op))
            return
        access = local_flow.component_target(target)
        if (
            access is not None
            and access[0] not in self.params
            and access[0] not in self.array_locals
            and access[0] not in self.tile_locals
        ):
            self.components.append(ComponentAssign(line, access[0], access[1], op, loop))

    def expr(self, node: ast.expr, loop: int, used: bool) -> None:
        # comparisons turned into numbers: `float(x > 0)`, `(x > 0) * w`
        numeric: set[int] = set()
        for sub in walk(node):
            if isinstance(sub, ast.Call) and call_name(sub.func) in _NUMERIC_CASTS:
                numeric.update(id(a) for a in sub.args if isinstance(a, ast.Compare))
            elif isinstance(sub, ast.BinOp):
                numeric.update(id(a) for a in (sub.left, sub.right) if isinstance(a, ast.Compare))
        for sub in walk(node):
            if isinstance(sub, ast.Call):
                self.call(sub, loop, used=used or sub is not node)
            elif isinstance(sub, ast.BinOp) and isinstance(sub.op, (ast.Div, ast.FloorDiv, ast.Mod)):
                op = {ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%"}[type(sub.op)]
                self.divisions.append(
                    Division(self.absolute(sub), op, text_of(sub.left), text_of(sub.right), loop)
                )
            elif isinstance(sub, ast.Compare):
                self.comparisons.append(
                    Comparison(
                        self.absolute(sub),
                        text_of(sub),
                        loop,
                        id(sub) in numeric,
                        tuple(sorted(names_in(sub))),
                    )
                )
            elif isinstance(sub, ast.IfExp):
                self.selects.append(self.select(sub, "ifexp", sub.test, (sub.body, sub.orelse)))

    def call(self, node: ast.Call, loop: int, used: bool) -> None:
        line = self.absolute(node)
        name = call_name(node.func)
        args = tuple(text_of(a) for a in node.args) + tuple(
            f"{k.arg}={text_of(k.value)}" if k.arg else f"**{text_of(k.value)}" for k in node.keywords
        )
        guards_now = sorted(set().union(*self.guard_stack)) if self.guard_stack else []
        self.calls.append(
            Call(
                line,
                name,
                text_of(node.func),
                args,
                used,
                loop,
                tuple(tuple(sorted(names_in(a))) for a in node.args),
                bool(node.args) and guards.nonzero(node.args[0], self.assigned, self.safe),
                tuple(guards_now),
            )
        )
        if name.startswith("atomic_") and node.args:
            self.atomics.append(AtomicCall(line, name, text_of(node.args[0]), used, loop))
            self.atomic_nodes.append(node)
        if name in ("where", "select") and len(node.args) == 3:
            self.selects.append(self.select(node, name, node.args[0], (node.args[1], node.args[2])))

    def select(
        self, node: ast.expr, kind: str, condition: ast.expr, operands: tuple[ast.expr, ...]
    ) -> Select:
        return Select(
            self.absolute(node),
            kind,
            text_of(condition),
            tuple(text_of(o) for o in operands),
            tuple(_calls_in(o) for o in operands),
            tuple(guards.hazards(o, self.assigned, self.per_thread, self.safe) for o in operands),
            tuple(tuple(sorted(names_in(o))) for o in operands),
        )


_NUMERIC_CASTS = ("float", "float16", "float32", "float64", "int", "int32", "int64", "uint32", "uint64")


def _exits(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Continue, ast.Break))


def _calls_in(node: ast.expr) -> tuple[str, ...]:
    return tuple(sorted({call_name(n.func) for n in walk(node) if isinstance(n, ast.Call)} - {""}))


def names_assigned(tree: ast.AST) -> set[str]:
    """Names bound anywhere below ``tree``."""
    return {n.id for n in walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
