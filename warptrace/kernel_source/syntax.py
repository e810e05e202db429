"""Parsing kernel source text: the one place in warptrace that calls ``ast.parse``.

Everything else asks :mod:`warptrace.kernel_source` questions; these helpers turn a
source text into its function definition and name the small syntax shapes the
questions are about (dotted names, call names, root names of lvalues).
"""

from __future__ import annotations

import ast
import textwrap
from functools import lru_cache

__all__ = [
    "call_name",
    "constructs_value",
    "dotted",
    "names_in",
    "parse_function",
    "root_name",
    "text_of",
    "walk",
]

# The attribute under which walk() keeps a node's walk on the node itself.
_WALK = "_warptrace_walk"


@lru_cache(maxsize=2048)
def parse_function(source: str) -> ast.FunctionDef | None:
    """The first function definition in ``source`` (decorators included), or None.

    The source is dedented first (a kernel defined inside a function or class is
    indented); a syntax error yields None, never an exception. The tree is cached and
    shared: callers must not mutate it (:func:`walk` keeps its answers on the nodes)."""
    if not source:
        return None
    try:
        tree = ast.parse(textwrap.dedent(source))
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            return node
    return None


def call_name(func: ast.expr) -> str:
    """Last part of a called name: ``wp.sqrt`` -> ``sqrt``; "" for anything else."""
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


_CONSTRUCTORS = ("vec", "mat", "quat", "transform", "spatial_vector", "spatial_matrix")


def constructs_value(name: str) -> bool:
    """Whether a call of ``name`` (its last name part) builds a value of a type, linearly in each
    argument: ``wp.vec3(...)``, ``wp.mat33(...)``, ``wp.transform(...)``, a cast through an
    array's element type (``x.dtype(v)``), a type alias (``scalar(3.0)``, ``coords_type(0.0)``,
    a CamelCase type name)."""
    return (
        name.startswith(_CONSTRUCTORS)
        or name == "scalar"
        or name.endswith(("dtype", "_type"))
        or name[:1].isupper()
    )


def root_name(node: ast.expr) -> str | None:
    """The name an lvalue or attribute chain starts from: ``a[i].x`` -> ``a``."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def dotted(node: ast.expr) -> str | None:
    """``state.q`` for a pure attribute chain on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def walk(node: ast.AST) -> tuple[ast.AST, ...]:
    """``tuple(ast.walk(node))``: ``node`` and every node below it, breadth first. Computed once
    per node and kept on it: the kernel-source questions walk the same shared trees
    (:func:`parse_function`) and subtrees many times over, and iterating a tuple costs a
    fraction of ``ast.walk``'s generator (which rebuilds each node's child list)."""
    found: tuple[ast.AST, ...] | None = node.__dict__.get(_WALK)
    if found is None:
        found = node.__dict__[_WALK] = _breadth_first(node)
    return found


def _breadth_first(node: ast.AST) -> tuple[ast.AST, ...]:
    """``tuple(ast.walk(node))``, the same order, without its generators: each node's children
    are its fields' nodes in ``_fields`` order, a list field's in list order (``ast.iter_child_nodes``)."""
    order = [node]
    append, extend = order.append, order.extend
    for current in order:  # grows while it is iterated: breadth first
        for name in current._fields:
            value = getattr(current, name, None)
            if isinstance(value, ast.AST):
                append(value)
            elif isinstance(value, list):
                extend([item for item in value if isinstance(item, ast.AST)])
    return tuple(order)


def names_in(node: ast.AST) -> set[str]:
    """Every name mentioned below ``node``."""
    return {n.id for n in walk(node) if isinstance(n, ast.Name)}


def text_of(node: ast.AST) -> str:
    """The source text of ``node`` as Python writes it back."""
    return ast.unparse(node)
