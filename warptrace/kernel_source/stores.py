"""Questions about stores and calls in a kernel body that the per-argument facts (first
read line, first write line) cannot answer alone. Each answers conservatively when the
source is missing or holds something it does not understand."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from functools import lru_cache

from warptrace.kernel_source.syntax import names_in, parse_function, text_of, walk

__all__ = [
    "NOT_REPLAYED",
    "RESULT_DISCARDED",
    "RESULT_USED",
    "passes_to_function",
    "stores_after",
    "stores_before_reads",
    "stores_twice",
    "whole_array_calls",
    "writes_array",
]

# How the adjoint replays a write to forward memory (see passes_to_function)
NOT_REPLAYED = 0
RESULT_DISCARDED = 1  # replayed by a @wp.func whose result the kernel ignores (plain accumulation)
RESULT_USED = 2  # replayed by a @wp.func whose result the kernel uses (a counter handing out slots)

_NOT_USER_CALLS = {"range", "int", "float", "len", "min", "max", "abs"}


@lru_cache(maxsize=1024)
def stores_twice(source: str, def_line: int, target_text: str) -> list[int] | None:
    """Absolute lines of two plain stores to the same element of ``target_text`` (``arg`` or
    ``arg.field``), or of one store that a ``for`` loop repeats on the same element; None when
    not proven.

    "Same element": the index expressions are identical and every name in them is
    assigned once in the kernel (``i = wp.tid()``), so both stores hit the same element."""
    func = parse_function(source)
    if func is None:
        return None
    assigned: dict[str, int] = defaultdict(int)
    for node in walk(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            assigned[node.id] += 1
    stores: dict[str, list[int]] = defaultdict(list)
    looped: list[int] = []
    loops: list[set[str]] = []  # names (re)bound by each enclosing for loop

    def absolute(node: ast.AST) -> int:
        return def_line + getattr(node, "lineno", func.lineno) - func.lineno

    def record(target: ast.AST) -> None:
        if not isinstance(target, ast.Subscript) or text_of(target.value) != target_text:
            return
        names = names_in(target.slice)
        if any(assigned[name] > 1 for name in names):
            return
        stores[ast.dump(target.slice)].append(absolute(target))
        if any(not (names & bound) for bound in loops):
            looped.append(absolute(target))

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.For):
            bound = {n.id for n in walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            loops.append(bound)
            for child in node.body + node.orelse:
                visit(child)
            loops.pop()
            return
        if isinstance(node, ast.Assign):
            for target in node.targets:
                record(target)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            record(node.target)
        for nested in ast.iter_child_nodes(node):
            if isinstance(nested, ast.stmt):
                visit(nested)

    for statement in func.body:
        visit(statement)
    for lines in stores.values():
        if len(lines) >= 2:
            return sorted(lines)[:2]
    return looped[:1] or None


@lru_cache(maxsize=1024)
def passes_to_function(source: str, target_text: str, custom_replay: tuple[str, ...]) -> int:
    """Whether ``target_text`` (``arg`` / ``arg.field``) is passed to a user function (replayed
    in full by the adjoint) that has no custom replay: NOT_REPLAYED, RESULT_DISCARDED (the
    call is a statement of its own) or RESULT_USED (``slot = f(count)``). Unparseable
    source: RESULT_USED."""
    func = parse_function(source)
    if func is None:
        return RESULT_USED
    replayed = {name.rsplit(".", 1)[-1] for name in custom_replay}
    discarded = {id(node.value) for node in walk(func) if isinstance(node, ast.Expr)}
    found = NOT_REPLAYED
    for node in walk(func):
        if not isinstance(node, ast.Call):
            continue
        name = text_of(node.func)
        if name.startswith(("wp.", "warp.")) or name in _NOT_USER_CALLS:
            continue
        if name.rsplit(".", 1)[-1] in replayed:
            continue
        if any(text_of(a) == target_text for a in node.args) or any(
            text_of(k.value) == target_text for k in node.keywords
        ):
            found = max(found, RESULT_DISCARDED if id(node) in discarded else RESULT_USED)
    return found


def stores_after(lines: list[str], start: int, target_text: str) -> bool:
    """Whether a source line from index ``start`` on stores into ``target_text[...]`` or hands
    ``target_text`` itself to a call (which may store into it)."""
    path = re.escape(target_text)
    store = re.compile(r"(?<![\w.])" + path + r"\s*(\[[^\]]*\]\s*)+=(?!=)")
    passed = re.compile(r"(?<![\w.])" + path + r"(?![\w.\s\[])")
    for text in lines[max(start, 0) :]:
        code = text.split("#", 1)[0]
        if store.search(code) or passed.search(code):
            return True
    return False


def _parents(func: ast.FunctionDef) -> dict[int, ast.AST]:
    return {id(child): node for node in walk(func) for child in ast.iter_child_nodes(node)}


def _body_names(func: ast.FunctionDef, name: str) -> list[ast.Name]:
    """The uses of ``name`` in the body (the signature's annotations and defaults left out)."""
    return [n for statement in func.body for n in walk(statement) if isinstance(n, ast.Name) and n.id == name]


@lru_cache(maxsize=1024)
def stores_before_reads(source: str, name: str) -> bool:
    """Whether the function stores into array ``name`` before it reads it, and never after:
    every use is a plain element store (``name[i] = v``, a statement of its own) or an
    element read (``name[i]`` in an expression), and every store ends before the first read
    begins, in source order. The replay then stores the same values again before reading
    them. False when unsure: another use (augmented assignment, a component store
    ``name[i][j] = v``, the array passed on, aliased or its attributes read), a read first,
    or no store at all."""
    func = parse_function(source)
    if func is None:
        return False
    parents = _parents(func)
    store_ends: list[tuple[int, int]] = []
    read_starts: list[tuple[int, int]] = []
    for node in _body_names(func, name):
        parent = parents.get(id(node))
        if not isinstance(parent, ast.Subscript) or parent.value is not node:
            return False
        if isinstance(parent.ctx, ast.Load):
            outer = parents.get(id(parent))
            if isinstance(outer, (ast.Subscript, ast.Attribute)) and not isinstance(outer.ctx, ast.Load):
                return False  # name[i][j] = v, name[i].x = v: a read-modify-write of element i
            read_starts.append((node.lineno, node.col_offset))
            continue
        statement = parents.get(id(parent))
        if not isinstance(statement, ast.Assign) or parent not in statement.targets:
            return False
        store_ends.append((statement.end_lineno or statement.lineno, statement.end_col_offset or 0))
    if not store_ends or not read_starts:
        return False
    return max(store_ends) < min(read_starts)


@lru_cache(maxsize=1024)
def whole_array_calls(source: str, name: str) -> tuple[tuple[str, str, int], ...] | None:
    """When every use of ``name`` in the function body is a positional argument of a call
    (``f(name, ...)``): the (called text, last name part, argument position) of each; None
    when some other use exists or the source does not parse."""
    func = parse_function(source)
    if func is None:
        return None
    parents = _parents(func)
    found = []
    for node in _body_names(func, name):
        call = parents.get(id(node))
        if not isinstance(call, ast.Call) or node not in call.args:
            return None
        called = text_of(call.func)
        found.append((called, called.rsplit(".", 1)[-1], call.args.index(node)))
    return tuple(found)


_ARRAY_WRITERS = ("tile_store", "tile_atomic_add")


@lru_cache(maxsize=1024)
def writes_array(source: str, name: str) -> tuple[bool, tuple[tuple[str, str, int], ...]]:
    """Whether the function in ``source`` writes array parameter ``name`` itself (a store into an
    element, an augmented assignment, an atomic, a tile store), and the (called text, last name
    part, argument position) of each call that receives ``name`` whole (the caller decides about
    those). Unparseable source: (True, ())."""
    func = parse_function(source)
    if func is None:
        return True, ()
    writes = False
    passed = []
    for node in (n for statement in func.body for n in walk(statement)):
        if isinstance(node, ast.Call):
            called = text_of(node.func)
            last = called.rsplit(".", 1)[-1]
            first = node.args[0] if node.args else None
            if (last.startswith("atomic_") or last in _ARRAY_WRITERS) and _rooted(first, name):
                writes = True
            for position, arg in enumerate(node.args):
                if isinstance(arg, ast.Name) and arg.id == name:
                    passed.append((called, last, position))
        elif isinstance(node, ast.AugAssign) and _rooted(node.target, name):
            writes = True
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, (ast.Subscript, ast.Attribute)) and _rooted(t, name) for t in targets):
                writes = True
    return writes, tuple(passed)


def _rooted(node: ast.AST | None, name: str) -> bool:
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return isinstance(node, ast.Name) and node.id == name
