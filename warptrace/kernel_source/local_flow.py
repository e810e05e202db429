"""How local values flow through one function body: def-use of locals, loop-carried state,
and the history of the components of local vectors and matrices.

Three small analyses over the syntax tree, in statement order, for the kernel-source
rules: which names a local is computed from (WT401-WT408 ask which kernel arguments a
value depends on), which locals a loop carries from one iteration to the next and whether
only additively (WT403), and whether a component of a local vector is assigned after it was
already assigned or after the local was read (WT402).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from warptrace.kernel_source.syntax import call_name, names_in, root_name

__all__ = ["carried_state", "component_history", "local_deps"]

_ADDITIVE_ATOMICS = ("atomic_add", "atomic_sub")


def _targets(node: ast.stmt) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return [node.target]
    if isinstance(node, ast.For):
        return [node.target]
    return []


def _flat(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return [t for element in target.elts for t in _flat(element)]
    return [target]


def local_deps(tree: ast.FunctionDef) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each name the body assigns, with the names its assigned values read (every assignment:
    the analysis is flow-insensitive, an over-approximation)."""
    deps: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or node is tree:
            continue
        if isinstance(node, ast.For):
            continue  # a loop variable is an integer index: no gradient flows through it
        value = getattr(node, "value", None)
        for target in _targets(node):
            for element in _flat(target):
                root = root_name(element)
                if root is None:
                    continue
                read = names_in(value) if isinstance(value, ast.expr) else set()
                deps.setdefault(root, set()).update(read - {root})
    return tuple((name, tuple(sorted(read))) for name, read in sorted(deps.items()))


# ---------------------------------------------------------------- loop-carried state


def _loads(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _additive(expr: ast.expr, name: str) -> bool:
    """Whether ``name`` appears in ``expr`` only as a term of sums and differences (the
    adjoint of such an expression does not need the value of ``name``)."""
    if name not in _loads(expr):
        return True
    if isinstance(expr, ast.Name):
        return True
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        return _additive(expr.operand, name)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
        return _additive(expr.left, name) and _additive(expr.right, name)
    if isinstance(expr, (ast.Subscript, ast.Attribute)) and root_name(expr) == name:
        # a component (`color[0]`, `v.x`) at an index that does not depend on the value
        return isinstance(expr.value, ast.Name) and not (
            isinstance(expr, ast.Subscript) and name in _loads(expr.slice)
        )
    if isinstance(expr, ast.Call) and call_name(expr.func).startswith(_CONSTRUCTORS) and not expr.keywords:
        # wp.vec3(c[0] + r[0], c[1] + r[1], ...): a constructor is linear in each argument
        return all(_additive(arg, name) for arg in expr.args)
    return False


_CONSTRUCTORS = ("vec", "mat", "quat", "transform", "spatial_", "float")


def _sequence(body: list[ast.stmt]) -> list[ast.stmt]:
    """The simple statements of ``body`` in source order, compound statements flattened
    (their tests count as a statement of their own: the compound node itself)."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, (ast.If, ast.While, ast.For)):
            out.append(stmt)  # its test / iterator
            out.extend(_sequence(stmt.body))
            out.extend(_sequence(stmt.orelse))
        else:
            out.append(stmt)
    return out


def _header_loads(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.If, ast.While)):
        return _loads(stmt.test)
    if isinstance(stmt, ast.For):
        return _loads(stmt.iter)
    return _stmt_loads(stmt)


def _stmt_loads(stmt: ast.stmt) -> set[str]:
    """Names a simple statement reads; ``p *= x`` and ``v[0] += x`` read their target too."""
    loads = _loads(stmt)
    if isinstance(stmt, ast.AugAssign):
        root = root_name(stmt.target)
        if root is not None:
            loads.add(root)
    return loads


def _writes(stmt: ast.stmt) -> set[str]:
    out = set()
    for target in _targets(stmt):
        for element in _flat(target):
            root = root_name(element)
            if root is not None:
                out.add(root)
    return out


def _additive_use(stmt: ast.stmt, name: str) -> bool:
    """Whether statement ``stmt`` (which reads ``name``) uses it only additively."""
    if isinstance(stmt, ast.AugAssign):
        if root_name(stmt.target) == name and not isinstance(stmt.target, ast.Name):
            # v[0] += e on the carried vector itself
            return isinstance(stmt.op, (ast.Add, ast.Sub)) and name not in _loads(stmt.value)
        if isinstance(stmt.target, ast.Name) and stmt.target.id == name:
            return isinstance(stmt.op, (ast.Add, ast.Sub)) and name not in _loads(stmt.value)
        return (
            isinstance(stmt.op, (ast.Add, ast.Sub))
            and _additive(stmt.value, name)
            and not _index_reads(stmt.target, name)
        )
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
        targets = _targets(stmt)
        return _additive(stmt.value, name) and not any(_index_reads(t, name) for t in targets)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        if call_name(call.func) in _ADDITIVE_ATOMICS and call.args:
            *head, last = call.args
            return not any(name in _loads(a) for a in head) and _additive(last, name)
    return False


def _index_reads(target: ast.expr, name: str) -> bool:
    """``a[int(p)] = ...``: the carried value used as an index is not additive."""
    return any(name in _loads(n.slice) for n in ast.walk(target) if isinstance(n, ast.Subscript))


def carried_state(loop: ast.For | ast.While) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Locals the loop carries non-additively from one iteration to the next, and for each
    the (relative) line of its first non-additive use. A local is carried when the body (or
    the loop test) reads it before the body assigns it, and the body assigns it."""
    sequence = _sequence(loop.body)
    own = _loads(loop.test) if isinstance(loop, ast.While) else set()
    target = names_in(loop.target) if isinstance(loop, ast.For) else set()
    written: set[str] = set()
    live_in: set[str] = set(own)
    for stmt in sequence:
        live_in |= _header_loads(stmt) - written
        written |= _writes(stmt)
    carried = sorted((live_in & written) - target)
    names, lines = [], []
    for name in carried:
        # the line to change: the statement that updates the local non-additively (`p *= x`,
        # `w = w * g`), else its first non-additive use
        update = next(
            (
                stmt
                for stmt in sequence
                if not isinstance(stmt, (ast.If, ast.While, ast.For))
                and name in _writes(stmt)
                and name in _stmt_loads(stmt)
                and not _additive_use(stmt, name)
            ),
            None,
        )
        if update is not None:
            names.append(name)
            lines.append(update.lineno)
            continue
        for stmt in sequence:
            if isinstance(stmt, (ast.If, ast.While, ast.For)):
                if name in _header_loads(stmt):
                    names.append(name)
                    lines.append(stmt.lineno)
                    break
                continue
            if name in _stmt_loads(stmt) and not _additive_use(stmt, name):
                names.append(name)
                lines.append(stmt.lineno)
                break
        else:
            if isinstance(loop, ast.While) and name in own:
                names.append(name)
                lines.append(loop.lineno)
    return tuple(names), tuple(lines)


# ---------------------------------------------------------------- components of local vectors


@dataclass
class _Local:
    assigned: dict[str, int] = field(default_factory=dict)  # component text -> line
    read: dict[str, int] = field(default_factory=dict)  # component text ("*" = whole) -> line


def _component(target: ast.expr) -> tuple[str, str] | None:
    if isinstance(target, (ast.Subscript, ast.Attribute)) and isinstance(target.value, ast.Name):
        if isinstance(target, ast.Subscript):
            return target.value.id, "[" + ast.unparse(target.slice).strip("()") + "]"
        return target.value.id, "." + target.attr
    return None


class _History:
    """Walks a body in statement order with per-branch copies of the state of each local."""

    def __init__(self, params: set[str]) -> None:
        self.params = params
        # (relative line, local, component) -> ("assigned" | "read", previous relative line)
        self.found: dict[tuple[int, str, str], tuple[str, int]] = {}
        self.fresh: list[set[str]] = []  # per enclosing loop, the locals its body assigns whole

    def block(
        self, body: list[ast.stmt], state: dict[str, _Local], loop_names: set[str]
    ) -> dict[str, _Local]:
        for stmt in body:
            state = self.stmt(stmt, state, loop_names)
        return state

    def stmt(self, stmt: ast.stmt, state: dict[str, _Local], loop_names: set[str]) -> dict[str, _Local]:
        if isinstance(stmt, ast.If):
            self.reads(stmt.test, state, None)
            left = self.block(stmt.body, _copy(state), loop_names)
            right = self.block(stmt.orelse, _copy(state), loop_names)
            return _merge(left, right)
        if isinstance(stmt, (ast.For, ast.While)):
            header = stmt.iter if isinstance(stmt, ast.For) else stmt.test
            self.reads(header, state, None)
            # names that change from one iteration to the next: the loop variable and every
            # name the body assigns; a component indexed by one of them is a different slot
            inner = loop_names | (names_in(stmt.target) if isinstance(stmt, ast.For) else set())
            inner |= {root for s in ast.walk(stmt) if isinstance(s, ast.stmt) for root in _writes(s)}
            fresh = {
                root
                for s in ast.walk(stmt)
                if isinstance(s, (ast.Assign, ast.AnnAssign))
                for root in _plain(s)
            }
            self.fresh.append(fresh)
            after = self.block(stmt.body, _copy(state), inner)
            self.fresh.pop()
            return _merge(after, self.block(stmt.orelse, _copy(after), loop_names))
        targets = _targets(stmt)
        components = [c for t in targets for e in _flat(t) if (c := _component(e)) is not None]
        value = getattr(stmt, "value", None)
        skip = {c[0] for c in components} if isinstance(stmt, ast.AugAssign) else set()
        if isinstance(value, ast.expr):
            self.reads(value, state, skip)
        for target in targets:
            for element in _flat(target):
                if isinstance(element, ast.Subscript):
                    self.reads(element.slice, state, None)
        for target in targets:
            for element in _flat(target):
                if isinstance(element, ast.Name):
                    state[element.id] = _Local()
        for local, component in components:
            if local in self.params:
                continue
            entry = state.setdefault(local, _Local())
            op_assign = not isinstance(stmt, ast.AugAssign)
            if op_assign:
                key = (stmt.lineno, local, component)
                repeated = (
                    bool(self.fresh)
                    and not (names_in_text(component) & loop_names)
                    and not any(local in fresh for fresh in self.fresh)
                )
                read_line = entry.read.get(component, entry.read.get("*", -1))
                if component in entry.assigned:
                    self.found[key] = ("assigned", entry.assigned[component])
                elif read_line >= 0:
                    self.found[key] = ("read", read_line)
                elif repeated:
                    self.found[key] = ("assigned", stmt.lineno)
            entry.assigned.setdefault(component, stmt.lineno)
        return state

    def reads(self, node: ast.AST, state: dict[str, _Local], skip: set[str] | None) -> None:
        """Record the reads in ``node``: ``v[c]``/``v.x`` reads one component, a bare ``v`` all."""
        line = getattr(node, "lineno", -1)
        parts = set()
        for sub in ast.walk(node):
            access = _component(sub) if isinstance(sub, (ast.Subscript, ast.Attribute)) else None
            if access is not None and isinstance(getattr(sub, "ctx", None), ast.Load):
                local, component = access
                parts.add(id(sub.value))  # type: ignore[attr-defined]
                if local in state and not (skip and local in skip):
                    state[local].read.setdefault(component, line)
        for sub in ast.walk(node):
            if (
                isinstance(sub, ast.Name)
                and isinstance(sub.ctx, ast.Load)
                and id(sub) not in parts
                and sub.id in state
                and not (skip and sub.id in skip)
            ):
                state[sub.id].read.setdefault("*", line)


def names_in_text(component: str) -> set[str]:
    """Names in a component text (``[i, j]`` -> {i, j})."""
    text = component.strip("[].")
    out = set()
    for part in text.replace(",", " ").replace("+", " ").replace("-", " ").split():
        if part.isidentifier():
            out.add(part)
    return out


def _plain(stmt: ast.Assign | ast.AnnAssign) -> set[str]:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def _copy(state: dict[str, _Local]) -> dict[str, _Local]:
    return {k: _Local(dict(v.assigned), dict(v.read)) for k, v in state.items()}


def _merge(left: dict[str, _Local], right: dict[str, _Local]) -> dict[str, _Local]:
    out = _copy(left)
    for name, entry in right.items():
        if name not in out:
            out[name] = _Local(dict(entry.assigned), dict(entry.read))
            continue
        for component, line in entry.assigned.items():
            out[name].assigned.setdefault(component, line)
        for component, line in entry.read.items():
            out[name].read.setdefault(component, line)
    return out


def component_history(tree: ast.FunctionDef) -> dict[tuple[int, str, str], tuple[str, int]]:
    """For each component assignment ``v[c] = e`` of a local (relative line, local, component)
    that comes after an assignment of the same component or after a read of the local (since
    its last whole-value assignment; exclusive ``if``/``else`` branches kept apart), what came
    before: ("assigned" | "read", relative line)."""
    history = _History({a.arg for a in tree.args.args})
    history.block(tree.body, {}, set())
    return history.found
