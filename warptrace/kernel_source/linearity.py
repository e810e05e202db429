"""Which values a kernel's adjoint uses: a forward taint walk over the kernel body.

``adjoint_needs_value(source, path, array_params, active)`` answers whether the adjoint
of a kernel depends on the values it read from the array ``path`` (``x`` or
``state.q``). It is False only when every use of those values is provably linear
(sums, differences, products with values that do not depend on arrays with a gradient,
linear atomics, stores, linear tile maps), e.g. ``q[i] += DT * qd[i]``: then an
overwrite of that array after the launch cannot change any gradient. Anything the walk
does not understand counts as a use (conservative).
"""

from __future__ import annotations

import ast
from functools import lru_cache

from warptrace.kernel_source.syntax import call_name, parse_function, root_name
from warptrace.kernel_source.syntax import dotted as dotted_name

__all__ = ["adjoint_needs_value"]


@lru_cache(maxsize=4096)
def adjoint_needs_value(
    source: str, path: str, array_params: tuple[str, ...], active: tuple[str, ...]
) -> bool:
    """Does the adjoint of the kernel in ``source`` need the values read from ``path``?

    ``array_params``: every array argument path of the kernel; ``active``: those whose
    values feed a gradient at this launch. Unparseable source: True."""
    func = parse_function(source)
    if func is None:
        return True
    check = _Linearity(path, set(array_params), set(active))
    try:
        check.block(func.body)
        check.block(func.body)  # a second pass reaches the loop-carried dependencies
    except _NonLinear:
        return True
    return not check.seen


class _NonLinear(Exception):
    """The kernel uses the watched values in a way whose adjoint needs them."""


_LINEAR_CALLS = {
    "float", "float32", "float64", "float16", "neg", "add", "sub", "atomic_add", "atomic_sub",
    # tile operations that are linear maps of their tile argument
    "tile_transpose", "tile_fft", "tile_ifft", "tile_store", "tile_view", "tile_broadcast",
    "tile_reshape", "tile_squeeze", "tile_sum", "tile_atomic_add", "untile", "tile",
}  # fmt: skip
_BILINEAR_CALLS = {"mul", "dot", "cross", "outer", "ddot", "cw_mul"}
_CONSTANT_CALLS = {"tid", "int", "int32", "int64", "uint32", "len"}


class _Linearity:
    """Forward taint walk: ``watched`` = depends on the watched array's values, ``active`` =
    depends on any array value. A product of watched and active, a watched divisor, a
    watched value in a condition, an index or a non-linear function proves a dependency."""

    def __init__(self, path: str, array_params: set[str], active_params: set[str]) -> None:
        self.path = path
        self.array_params = array_params
        self.active_params = active_params  # arrays whose values feed a gradient
        self.watched: set[str] = set()
        self.active: set[str] = set()
        self.seen = False

    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.stmt(stmt)

    def stmt(self, node: ast.stmt) -> None:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            if node.value is None:
                return
            watched, active = self.expr(node.value)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                self.assign(target, watched, active)
        elif isinstance(node, ast.AugAssign):
            watched, active = self.expr(node.value)
            old_watched, old_active = self.expr_target(node.target)
            product = (watched and old_active) or (old_watched and active)
            linear = isinstance(node.op, (ast.Add, ast.Sub)) or (
                isinstance(node.op, ast.Mult) and not product
            )
            if not linear and (watched or old_watched):
                raise _NonLinear
            self.assign(node.target, watched or old_watched, active or old_active, augmented=True)
        elif isinstance(node, ast.Expr):
            self.expr(node.value)
        elif isinstance(node, (ast.If, ast.While)):
            if self.expr(node.test)[0]:
                raise _NonLinear  # the values decide control flow
            self.block(node.body)
            self.block(node.orelse)
        elif isinstance(node, ast.For):
            if self.expr(node.iter)[0]:
                raise _NonLinear
            self.block(node.body)
            self.block(node.body)
            self.block(node.orelse)
        elif isinstance(node, ast.Return):
            if node.value is not None:
                self.expr(node.value)
        elif isinstance(node, (ast.Pass, ast.Break, ast.Continue)):
            return
        else:
            raise _NonLinear  # unknown statement: assume the worst

    def assign(self, target: ast.expr, watched: bool, active: bool, augmented: bool = False) -> None:
        if isinstance(target, ast.Name):
            if augmented:
                watched = watched or target.id in self.watched
                active = active or target.id in self.active
            (self.watched.add if watched else self.watched.discard)(target.id)
            (self.active.add if active else self.active.discard)(target.id)
        elif isinstance(target, ast.Tuple):
            for element in target.elts:
                self.assign(element, watched, active, augmented)
        elif isinstance(target, ast.Subscript):
            if self.expr(target.slice)[0]:
                raise _NonLinear  # a watched value used as an index
            base = root_name(target.value)
            if base is not None and base not in self.array_params and dotted_name(target.value) != self.path:
                # a component of a local vector: it now depends on the stored value too
                if watched:
                    self.watched.add(base)
                if active:
                    self.active.add(base)
        elif isinstance(target, ast.Attribute):
            base = root_name(target)
            if base is not None and base not in self.array_params:
                if watched:
                    self.watched.add(base)
                if active:
                    self.active.add(base)
        else:
            raise _NonLinear

    def expr_target(self, target: ast.expr) -> tuple[bool, bool]:
        if isinstance(target, ast.Name):
            return target.id in self.watched, target.id in self.active
        if isinstance(target, ast.Subscript):
            return self.expr(target)
        return self.expr(target)

    def expr(self, node: ast.expr) -> tuple[bool, bool]:
        """(depends on the watched values, depends on any array values)"""
        if isinstance(node, ast.Constant):
            return False, False
        if isinstance(node, ast.Name):
            if node.id == self.path:
                raise _NonLinear  # the whole array handed to something (a @wp.func, ...)
            return node.id in self.watched, node.id in self.active
        if isinstance(node, ast.Attribute):
            dotted = dotted_name(node)
            if dotted == self.path:
                raise _NonLinear
            base = root_name(node)
            if base is not None and base not in self.array_params:
                return base in self.watched, base in self.active
            return False, False  # a module constant or a scalar struct field
        if isinstance(node, ast.Subscript):
            if self.expr(node.slice)[0]:
                raise _NonLinear
            dotted = dotted_name(node.value)
            if dotted == self.path:
                self.seen = True
                return True, self.path in self.active_params
            root = root_name(node.value)
            if root in self.array_params:
                # another array's values: they matter to the adjoint only if it has a grad
                return False, dotted in self.active_params or root in self.active_params
            return self.expr(node.value)
        if isinstance(node, (ast.Tuple, ast.List)):
            return self._any(node.elts)
        if isinstance(node, ast.UnaryOp):
            watched, active = self.expr(node.operand)
            if isinstance(node.op, ast.Not) and watched:
                raise _NonLinear
            return watched, active
        if isinstance(node, ast.BinOp):
            lw, la = self.expr(node.left)
            rw, ra = self.expr(node.right)
            if isinstance(node.op, (ast.Add, ast.Sub)):
                return lw or rw, la or ra
            if isinstance(node.op, ast.Mult):
                if (lw and ra) or (rw and la):
                    raise _NonLinear
                return lw or rw, la or ra
            if isinstance(node.op, ast.Div):
                if rw or (lw and ra):
                    raise _NonLinear
                return lw, la or ra
            if lw or rw:
                raise _NonLinear
            return False, la or ra
        if isinstance(node, ast.Call):
            name = call_name(node.func)
            args = list(node.args) + [kw.value for kw in node.keywords]
            if name == "tile_load" and node.args:
                source = dotted_name(node.args[0])
                rest = self._any(args[1:])
                if rest[0]:
                    raise _NonLinear  # a watched value as a tile offset
                if source == self.path:
                    self.seen = True
                    return True, self.path in self.active_params
                root = root_name(node.args[0])
                if root in self.array_params:
                    return False, source in self.active_params or root in self.active_params
                return self.expr(node.args[0])
            if name in ("tile_store", "tile_atomic_add") and len(node.args) >= 2:
                # a store (or linear accumulation) of the tile into the array: not a use of the
                # destination's values; the offsets are indices
                if self._any(node.args[2:] + [kw.value for kw in node.keywords])[0]:
                    raise _NonLinear
                self.expr(node.args[1])
                return False, False
            if name == "tile_matmul" and len(node.args) >= 2:
                return self._tile_matmul(node)
            if name in _CONSTANT_CALLS:
                if self._any(args)[0]:
                    raise _NonLinear
                return False, False
            if name in ("atomic_add", "atomic_sub") and len(node.args) >= 2:
                if self._any(node.args[1:-1])[0]:
                    raise _NonLinear  # watched index
                return self.expr(node.args[-1])
            results = [self.expr(arg) for arg in args]
            watched = any(w for w, _ in results)
            active = any(a for _, a in results)
            if not watched:
                return False, active
            if name in _LINEAR_CALLS or name.startswith(("vec", "mat", "quat", "transform")):
                return True, True
            if name in _BILINEAR_CALLS:
                if sum(1 for _, a in results if a) > 1:
                    raise _NonLinear
                return True, True
            raise _NonLinear
        if isinstance(node, (ast.Compare, ast.BoolOp, ast.IfExp)):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr) and self.expr(child)[0]:
                    raise _NonLinear
            return False, any(self.expr(c)[1] for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr))
        if isinstance(node, ast.Slice):
            return self._any([part for part in (node.lower, node.upper, node.step) if part is not None])
        raise _NonLinear

    def _tile_matmul(self, node: ast.Call) -> tuple[bool, bool]:
        """``c = wp.tile_matmul(a, b)``, or in place ``wp.tile_matmul(a, b, out, alpha, beta)``
        (``out = alpha * a @ b + beta * out``): bilinear in ``a`` and ``b``, linear in ``out``."""
        aw, aa = self.expr(node.args[0])
        bw, ba = self.expr(node.args[1])
        if (aw and ba) or (bw and aa):
            raise _NonLinear  # a product of the watched values with gradient-carrying ones
        scalars = self._any(node.args[3:] + [kw.value for kw in node.keywords])
        if scalars[0] or (scalars[1] and (aw or bw)):
            raise _NonLinear
        if len(node.args) < 3:
            return aw or bw, aa or ba or scalars[1]
        out = node.args[2]
        ow, oa = self.expr(out)
        if ow and scalars[1]:
            raise _NonLinear  # beta * out with an active beta
        if not isinstance(out, ast.Name):
            raise _NonLinear
        self.assign(out, aw or bw or ow, aa or ba or oa or scalars[1])
        return False, False

    def _any(self, nodes: list[ast.expr]) -> tuple[bool, bool]:
        results = [self.expr(n) for n in nodes]
        return any(w for w, _ in results), any(a for _, a in results)
