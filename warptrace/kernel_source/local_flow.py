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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from warptrace.kernel_source.syntax import call_name, names_in, root_name, text_of, walk

__all__ = ["array_annotation_ndim", "array_locals", "carried_state", "component_history", "local_deps"]

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
    for node in walk(tree):
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


# ---------------------------------------------------------------- array aliases

_ARRAY_TYPES = ("array", "indexedarray", "fabricarray", "indexedfabricarray")


def array_annotation_ndim(node: ast.expr | None) -> int | None:
    """The dimension count of an array type (``wp.array(dtype=float, ndim=2)``,
    ``wp.array2d(dtype=float)``, ``wp.array2d[float]``, a ``wp.array(ptr=..., shape=(n,
    m))`` constructor): None when ``node`` is not an array type, 0 for an array whose
    dimension count is not written."""
    if node is None:
        return None
    head = (
        node.func if isinstance(node, ast.Call) else node.value if isinstance(node, ast.Subscript) else node
    )
    name = call_name(head)
    base = name[:-2] if len(name) > 2 and name[-2].isdigit() and name[-1] == "d" else name
    if base not in _ARRAY_TYPES:
        return None
    if base != name:
        return int(name[-2])
    if isinstance(node, ast.Call):
        for keyword in node.keywords:
            if keyword.arg == "ndim" and isinstance(keyword.value, ast.Constant):
                value = keyword.value.value
                return value if isinstance(value, int) and not isinstance(value, bool) else 0
            if keyword.arg == "shape" and isinstance(keyword.value, ast.Tuple):
                return len(keyword.value.elts)
        if any(k.arg in ("ndim", "shape") for k in node.keywords):
            return 0
        return 1  # Warp's default
    return 0


def _array_ndim(node: ast.expr, known: dict[str, int]) -> int | None:
    """The dimension count of the array an expression evaluates to (0: unknown count),
    None when it is not an array: a name of one, a slice of one (``a[0:1, :]``), an array
    indexed by fewer indices than its dimensions (``a2d[i]``), an array constructor."""
    if isinstance(node, ast.Name):
        return known.get(node.id)
    if isinstance(node, ast.Subscript):
        ndim = _array_ndim(node.value, known)
        if ndim is None:
            return None
        indices = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        slices = sum(isinstance(i, ast.Slice) for i in indices)
        if ndim == 0:
            return 0 if slices else None
        left = ndim - len(indices) + slices
        return left if left > 0 and (slices or len(indices) < ndim) else None
    if isinstance(node, ast.Call):
        return array_annotation_ndim(node)
    return None


def array_locals(tree: ast.FunctionDef) -> frozenset[str]:
    """Locals bound to an array (a view of an array argument, ``y_slice = y[0:1, :]``; a
    sub-array ``row = a2d[i]``; another array local; ``wp.array(ptr=...)``): a subscript
    store into one writes array memory, it is not a component of a local value."""
    known: dict[str, Any] = {}
    for arg in tree.args.args:
        ndim = array_annotation_ndim(arg.annotation)
        if ndim is not None:
            known[arg.arg] = ndim
    params = set(known)
    for node in walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            ndim = array_annotation_ndim(node.annotation)
            if ndim is not None:
                known[node.target.id] = ndim
    _propagate(_name_binds(tree), known, _array_ndim)
    return frozenset(known) - params


def tile_locals(tree: ast.FunctionDef) -> frozenset[str]:
    """Locals bound to a tile (the result of a ``wp.tile*`` call, or another tile local): an
    assignment into one (``t[0] = r``, ``t[0:4, :] = v``) is a tile operation whose adjoint
    Warp routes by region, not a component of a vector or matrix value."""

    def tile(value: ast.expr, known: dict[str, Any]) -> Any:
        if isinstance(value, ast.Call) and call_name(value.func).startswith("tile"):
            return True
        return True if isinstance(value, ast.Name) and value.id in known else None

    known: dict[str, Any] = {}
    _propagate(_name_binds(tree), known, tile)
    return frozenset(known)


def _name_binds(tree: ast.FunctionDef) -> list[tuple[str, ast.expr]]:
    """(name, value) of every assignment of a value to a plain name (``x = v``, ``x: T = v``)."""
    binds: list[tuple[str, ast.expr]] = []
    for node in walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            binds.append((node.target.id, node.value))
        elif isinstance(node, ast.Assign):
            binds.extend((t.id, node.value) for t in node.targets if isinstance(t, ast.Name))
    return binds


def _propagate(
    binds: list[tuple[str, ast.expr]],
    known: dict[str, Any],
    kind_of: Callable[[ast.expr, dict[str, Any]], Any],
) -> None:
    """Add to ``known`` every bound name whose value ``kind_of`` classifies (not None), until
    nothing changes (a name bound from a known name is known too)."""
    changed = True
    while changed:
        changed = False
        for name, value in binds:
            if name in known:
                continue
            kind = kind_of(value, known)
            if kind is not None:
                known[name] = kind
                changed = True


# ---------------------------------------------------------------- loop-carried state


def _loads(node: ast.AST) -> set[str]:
    return {n.id for n in walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _constant(expr: ast.expr, varying: frozenset[str] | None) -> bool:
    """Whether ``expr`` is the same in every iteration and thread and reads no array: literals,
    and names outside ``varying`` (module constants, a kernel's scalar arguments) in
    arithmetic. None: nothing counts as constant."""
    if varying is None:
        return False
    for node in walk(expr):
        if isinstance(node, ast.Name):
            if node.id in varying:
                return False
        elif not isinstance(node, (ast.Constant, ast.UnaryOp, ast.BinOp, ast.Attribute, ast.operator,
                                   ast.unaryop, ast.expr_context)):  # fmt: skip
            return False
    return True


def _additive(expr: ast.expr, name: str, varying: frozenset[str] | None = None) -> bool:
    """Whether ``name`` appears in ``expr`` only as a term of sums and differences, or scaled
    by a constant (the adjoint of such an expression does not need the value of ``name``)."""
    if name not in _loads(expr):
        return True
    if isinstance(expr, ast.Name):
        return True
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, (ast.USub, ast.UAdd)):
        return _additive(expr.operand, name, varying)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
        return _additive(expr.left, name, varying) and _additive(expr.right, name, varying)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult):
        return (_constant(expr.left, varying) and _additive(expr.right, name, varying)) or (
            _constant(expr.right, varying) and _additive(expr.left, name, varying)
        )
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Div):
        return _constant(expr.right, varying) and _additive(expr.left, name, varying)
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


def _additive_use(stmt: ast.stmt, name: str, varying: frozenset[str] | None = None) -> bool:
    """Whether statement ``stmt`` (which reads ``name``) uses it only additively (or scales it
    by a constant: ``p *= 0.99``, whose adjoint is the same scaling whatever ``p`` holds)."""
    if isinstance(stmt, ast.AugAssign):
        if root_name(stmt.target) == name and not isinstance(stmt.target, ast.Name):
            # v[0] += e on the carried vector itself
            return isinstance(stmt.op, (ast.Add, ast.Sub)) and name not in _loads(stmt.value)
        if isinstance(stmt.target, ast.Name) and stmt.target.id == name:
            if isinstance(stmt.op, (ast.Mult, ast.Div)):
                return _constant(stmt.value, varying)
            return isinstance(stmt.op, (ast.Add, ast.Sub)) and name not in _loads(stmt.value)
        return (
            isinstance(stmt.op, (ast.Add, ast.Sub))
            and _additive(stmt.value, name, varying)
            and not _index_reads(stmt.target, name)
        )
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
        targets = _targets(stmt)
        return _additive(stmt.value, name, varying) and not any(_index_reads(t, name) for t in targets)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        if call_name(call.func) in _ADDITIVE_ATOMICS and call.args:
            *head, last = call.args
            return not any(name in _loads(a) for a in head) and _additive(last, name, varying)
    return False


def _index_reads(target: ast.expr, name: str) -> bool:
    """``a[int(p)] = ...``: the carried value used as an index is not additive."""
    return any(name in _loads(n.slice) for n in walk(target) if isinstance(n, ast.Subscript))


def carried_state(
    loop: ast.For | ast.While, varying: frozenset[str] | None = None
) -> tuple[tuple[str, ...], tuple[int, ...], tuple[str, ...]]:
    """Locals the loop carries non-additively from one iteration to the next, for each the
    (relative) line to change, and how it is used: "value" (a product, a recurrence: the
    adjoint uses the final value instead of each iteration's) or "branch" (only a branch
    condition reads it, e.g. an argmin search ``if d < best: best = d``: the replay takes
    the branches from the final value). A local is carried when the body (or the loop test)
    reads it before the body assigns it, and the body assigns it."""
    sequence = _sequence(loop.body)
    own = _loads(loop.test) if isinstance(loop, ast.While) else set()
    target = names_in(loop.target) if isinstance(loop, ast.For) else set()
    written: set[str] = set()
    live_in: set[str] = set(own)
    for stmt in sequence:
        live_in |= _header_loads(stmt) - written
        written |= _writes(stmt)
    carried = sorted((live_in & written) - target)
    names, lines, kinds = [], [], []
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
                and not _additive_use(stmt, name, varying)
            ),
            None,
        )
        use = update or next(
            (
                stmt
                for stmt in sequence
                if not isinstance(stmt, (ast.If, ast.While, ast.For))
                and name in _stmt_loads(stmt)
                and not _additive_use(stmt, name, varying)
            ),
            None,
        )
        if use is not None:
            names.append(name)
            lines.append(use.lineno)
            kinds.append("value")
            continue
        branch = next(
            (s for s in sequence if isinstance(s, (ast.If, ast.While)) and name in _header_loads(s)), None
        )
        if branch is not None:
            names.append(name)
            lines.append(branch.lineno)
            kinds.append("branch")
        elif isinstance(loop, ast.While) and name in own:
            names.append(name)
            lines.append(loop.lineno)
            kinds.append("branch")
    return tuple(names), tuple(lines), tuple(kinds)


# ---------------------------------------------------------------- components of local vectors


@dataclass
class _Local:
    """What the components of a local hold: per assigned component, (line, names its value
    reads); for the others, what the whole-value assignment gave them."""

    init_line: int = -1
    init_names: tuple[str, ...] = ()
    init_args: tuple[ast.expr, ...] | None = None  # constructor arguments (wp.vec3(a, b, c))
    held: dict[str, tuple[int, tuple[str, ...]]] = field(default_factory=dict)

    def previous(self, component: str) -> tuple[str, int, tuple[str, ...]]:
        if component in self.held:
            line, names = self.held[component]
            return "assigned", line, names
        index = _literal_index(component)
        if self.init_args is not None and index is not None:
            if not self.init_args:
                return "initialized", self.init_line, ()
            arg = self.init_args[index] if index < len(self.init_args) else self.init_args[0]
            return "initialized", self.init_line, value_names(arg)
        return "initialized", self.init_line, self.init_names


_LETTERS = {".x": 0, ".y": 1, ".z": 2, ".w": 3}


def component_target(target: ast.expr) -> tuple[str, str] | None:
    """(local, component text) of ``v[0]``, ``v.x``, ``m[i, j]``; None for anything else.

    The one spelling of a component: the facts' component assignments and the history
    here are joined on it."""
    if isinstance(target, (ast.Subscript, ast.Attribute)) and isinstance(target.value, ast.Name):
        if isinstance(target, ast.Subscript):
            return target.value.id, "[" + text_of(target.slice).strip("()") + "]"
        return target.value.id, "." + target.attr
    return None


def _literal_index(component: str) -> int | None:
    if component in _LETTERS:
        return _LETTERS[component]
    text = component.strip("[]")
    return int(text) if text.isdigit() else None


def value_names(node: ast.AST) -> tuple[str, ...]:
    """Names a value reads, without the names of called functions (``wp`` in ``wp.vec3(...)``)."""
    called = {id(n) for c in walk(node) if isinstance(c, ast.Call) for n in walk(c.func)}
    return tuple(
        sorted(
            {
                n.id
                for n in walk(node)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in called
            }
        )
    )


def _constructor_args(value: ast.expr) -> tuple[ast.expr, ...] | None:
    if isinstance(value, ast.Call) and not value.keywords and call_name(value.func).startswith(_CONSTRUCTORS):
        return tuple(value.args)
    return None


class _History:
    """Walks a body in statement order with per-branch copies of the state of each local."""

    def __init__(self, params: set[str]) -> None:
        self.params = params
        # (relative line, local, component) -> ("assigned" | "initialized", relative line, names)
        self.found: dict[tuple[int, str, str], tuple[str, int, tuple[str, ...]]] = {}
        self.fresh: list[set[str]] = []  # per enclosing loop, the locals its body assigns whole

    def block(
        self, body: list[ast.stmt], state: dict[str, _Local], loop_names: set[str]
    ) -> dict[str, _Local]:
        for stmt in body:
            state = self.stmt(stmt, state, loop_names)
        return state

    def stmt(self, stmt: ast.stmt, state: dict[str, _Local], loop_names: set[str]) -> dict[str, _Local]:
        if isinstance(stmt, ast.If):
            left = self.block(stmt.body, _copy(state), loop_names)
            right = self.block(stmt.orelse, _copy(state), loop_names)
            return _merge(left, right)
        if isinstance(stmt, (ast.For, ast.While)):
            # names that change from one iteration to the next: the loop variable and every
            # name the body assigns; a component indexed by one of them is a different slot
            inner = loop_names | (names_in(stmt.target) if isinstance(stmt, ast.For) else set())
            inner |= {root for s in walk(stmt) if isinstance(s, ast.stmt) for root in _writes(s)}
            fresh = {
                root for s in walk(stmt) if isinstance(s, (ast.Assign, ast.AnnAssign)) for root in _plain(s)
            }
            self.fresh.append(fresh)
            after = self.block(stmt.body, _copy(state), inner)
            self.fresh.pop()
            return _merge(after, self.block(stmt.orelse, _copy(after), loop_names))
        targets = _targets(stmt)
        value = getattr(stmt, "value", None)
        if not isinstance(value, ast.expr):
            return state
        for target in targets:
            for element in _flat(target):
                if isinstance(element, ast.Name):
                    state[element.id] = _Local(stmt.lineno, value_names(value), _constructor_args(value))
        names = value_names(value)
        for target in targets:
            for element in _flat(target):
                access = component_target(element)
                if access is None or access[0] in self.params:
                    continue
                local, component = access
                entry = state.setdefault(local, _Local())
                if isinstance(stmt, ast.AugAssign):
                    _, line, before = entry.previous(component)
                    entry.held[component] = (stmt.lineno, tuple(sorted(set(before) | set(names))))
                    continue
                repeated = (
                    bool(self.fresh)
                    and not (names_in_text(component) & loop_names)
                    and not any(local in fresh for fresh in self.fresh)
                )
                kind, line, before = entry.previous(component)
                if repeated and kind == "initialized":
                    kind, line, before = "assigned", stmt.lineno, tuple(sorted(set(before) | set(names)))
                if before:
                    self.found[(stmt.lineno, local, component)] = (kind, line, before)
                entry.held[component] = (stmt.lineno, names)
        return state


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
    return {k: _Local(v.init_line, v.init_names, v.init_args, dict(v.held)) for k, v in state.items()}


def _merge(left: dict[str, _Local], right: dict[str, _Local]) -> dict[str, _Local]:
    out = _copy(left)
    for name, entry in right.items():
        if name not in out:
            out[name] = _Local(entry.init_line, entry.init_names, entry.init_args, dict(entry.held))
            continue
        for component, (line, names) in entry.held.items():
            if component in out[name].held:
                kept_line, kept = out[name].held[component]
                out[name].held[component] = (kept_line, tuple(sorted(set(kept) | set(names))))
            else:
                out[name].held[component] = (line, names)
    return out


def component_history(tree: ast.FunctionDef) -> dict[tuple[int, str, str], tuple[str, int, tuple[str, ...]]]:
    """For each component assignment ``v[c] = e`` of a local (relative line, local, component)
    that overwrites a value computed from names (not a constant), what it overwrites:
    ("assigned" (an earlier assignment of the component, or the same line repeated by a
    loop) | "initialized" (the local's whole-value assignment), relative line, the names
    the overwritten value reads). Exclusive ``if``/``else`` branches are kept apart. Warp
    does not clear the adjoint of the overwritten value (verified on 1.19): the gradient of
    the new value also flows into the old one."""
    history = _History({a.arg for a in tree.args.args})
    history.block(tree.body, {}, set())
    return history.found
