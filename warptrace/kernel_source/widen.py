"""A float64 copy of a ``@wp.func``'s source, for WT502's finite differences.

The recorder checks a custom adjoint against central differences of the forward
function; for a function declared in float32, differences of a float64 copy of it are
what exposes a small error that float32 cancellation hides. Warp types float literals as
float32, so the copy turns float annotations, ``float(...)`` casts and float literals
into ``wp.float64``. Pure text to text; the recorder compiles the result (and falls back
to float32 differences when the copy does not compile, e.g. it calls a float32 helper).
"""

from __future__ import annotations

import ast
import copy

from warptrace.kernel_source.syntax import parse_function

__all__ = ["float64_copy"]


class _Widen(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.copy_location(_f64(), node) if node.id == "float" else node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if node.attr in ("float32", "float16") and isinstance(node.value, ast.Name) and node.value.id == "wp":
            return ast.copy_location(_f64(), node)
        return self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, float):
            return ast.copy_location(ast.Call(func=_f64(), args=[node], keywords=[]), node)
        return node


def _f64() -> ast.Attribute:
    return ast.Attribute(value=ast.Name(id="wp", ctx=ast.Load()), attr="float64", ctx=ast.Load())


def float64_copy(source: str, name: str) -> str | None:
    """Source of ``@wp.func def NAME(...)``: the function in ``source`` with every float
    type, cast and literal made float64; None when ``source`` holds no function."""
    parsed = parse_function(source)
    if parsed is None:
        return None
    node = copy.deepcopy(parsed)  # the parsed tree is cached and shared
    node.decorator_list = [
        ast.Attribute(value=ast.Name(id="wp", ctx=ast.Load()), attr="func", ctx=ast.Load())
    ]
    node.name = name
    widened = ast.fix_missing_locations(_Widen().visit(node))
    return ast.unparse(widened)
