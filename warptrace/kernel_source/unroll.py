"""Whether Warp unrolls a ``for`` loop, from syntax and the constants the recorder resolved:
Warp's own decision (``Adjoint.get_unroll_range``) restated on the kernel's AST. A loop Warp
does not unroll is *dynamic*: its adjoint replay skips it (:mod:`.replay`)."""

from __future__ import annotations

import ast

from warptrace.kernel_source.syntax import call_name, text_of, walk

__all__ = ["range_bounds", "unrolled"]


def range_bounds(node: ast.expr, constants: dict[str, int]) -> tuple[tuple[str, ...], int | None]:
    """The ``range(...)`` argument texts and the trip count when every bound is an integer
    literal or a name the recorder resolved to an integer (``wp.constant``, a module int)."""
    if not isinstance(node, ast.Call) or call_name(node.func) != "range" or node.keywords:
        return (), None
    bounds = tuple(text_of(a) for a in node.args)
    values = [_integer(a, constants) for a in node.args]
    if any(v is None for v in values) or not 1 <= len(values) <= 3:
        return bounds, None
    try:
        return bounds, len(range(*values))  # type: ignore[arg-type]
    except ValueError:  # range(0, 4, 0)
        return bounds, None


def _static_call(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and call_name(node.func) == "static"


def _integer(node: ast.expr, constants: dict[str, int]) -> int | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _integer(node.operand, constants)
        return -value if value is not None else None
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def unrolled(node: ast.For, trips: int | None, max_unroll: int, constants: dict[str, int]) -> bool:
    """Warp's decision (``Adjoint.get_unroll_range``): the builtin name ``range`` with constant
    bounds, no ``break``, and a trip count up to ``max_unroll`` unless the loop holds
    ``wp.static`` (then always unrolled). A bound written ``wp.static(...)`` is a constant
    Warp evaluates at compile time (``range(wp.static(2 * N))``), whose count is not known here."""
    if not isinstance(node.iter, ast.Call) or not isinstance(node.iter.func, ast.Name):
        return False
    if trips is None:
        args = node.iter.args
        static_bounds = (
            call_name(node.iter.func) == "range"
            and 1 <= len(args) <= 3
            and not node.iter.keywords
            and all(_integer(a, constants) is not None or _static_call(a) for a in args)
            and any(_static_call(a) for a in args)
        )
        return static_bounds
    if any(isinstance(n, ast.Call) and call_name(n.func) == "static" for n in walk(node)):
        return True
    if any(isinstance(n, ast.Break) for s in node.body for n in walk(s)):
        return False
    return trips <= max_unroll
