"""Syntactic guards: whether an expression can be zero or non-finite, judged from its shape.

The kernel-source rules WT406 (select-overflow) and WT407 (nonsmooth-point) report an
operation only where nothing in the source keeps its argument away from the singular
point. "Possibly zero" is decided here, from syntax alone, and deliberately errs toward
*guarded* (a rule that cries wolf on correct code is worse than one that misses a case):

- ``wp.max(x, c)`` / ``max(x, c)`` with ``c`` anything but a literal zero, and
  ``wp.clamp(x, lo, hi)`` with ``lo`` anything but a literal zero: guarded;
- a sum with a positive literal or an epsilon-like term (an expression of names the
  function never assigns: scalar parameters, module constants, ``cfg.eps``,
  ``limit * limit``) (``d2 + 1.0e-8``, ``eps + wp.dot(v, v)``): guarded;
- a ``wp.where``/``wp.select``/conditional expression as the argument (the inner half of
  the "double where" remedy): guarded;
- a nonzero literal: guarded.

Branch guards (``if d2 > 0.0:`` around the call, or an earlier ``if d2 < eps: return``) are
names, collected by the walk in :mod:`.facts` and matched by the rules against the names
(and the locals those names are computed from) of the argument.
"""

from __future__ import annotations

import ast

from warptrace.kernel_source.syntax import call_name, walk

__all__ = ["HAZARD_CALLS", "hazards", "nonzero", "safe_locals", "varying"]

# Calls whose value or adjoint is non-finite somewhere on the real line: exp/pow overflow,
# log/sqrt/cbrt have an infinite derivative at zero (log and sqrt also NaN below it).
# acos/asin/length/normalize are not listed: Warp's own adjoints return 0 at their singular
# points (verified on Warp 1.19: ``adj_acos`` tests ``d > 0``, ``adj_length`` ``ret > kEps``).
HAZARD_CALLS = ("exp", "log", "log2", "log10", "sqrt", "cbrt", "pow")
_SELECTS = ("where", "select")


def nonzero(node: ast.expr, assigned: set[str], safe: frozenset[str] = frozenset()) -> bool:
    """Whether ``node`` is kept away from zero by its own shape (see the module docstring).

    ``assigned``: the names the function assigns (a name outside it is a parameter or a
    module constant, treated as an epsilon when it is added). ``safe``: locals every
    assignment of which is itself kept away from zero (``safe = wp.where(ok, x, 1.0)``)."""
    if isinstance(node, ast.Name):
        return node.id in safe
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and node.value != 0
    if isinstance(node, ast.IfExp):
        return True
    if isinstance(node, ast.Call):
        name = call_name(node.func)
        if name in _SELECTS:
            return True
        if name == "max" and len(node.args) == 2:
            if any(isinstance(a, ast.Name) and a.id in safe for a in node.args):
                return True
            return any(not _zero_literal(a) for a in node.args)
        if name == "clamp" and len(node.args) == 3:
            return not _zero_literal(node.args[1])
        if name in ("float", "float32", "float64") and len(node.args) == 1:
            return nonzero(node.args[0], assigned, safe)
        return False
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return any(_epsilon(term, assigned) for term in (node.left, node.right)) or (
            isinstance(node.left, ast.BinOp) and nonzero(node.left, assigned, safe)
        )
    return False


def safe_locals(tree: ast.FunctionDef, assigned: set[str]) -> frozenset[str]:
    """Locals every assignment of which is kept away from zero by its shape (:func:`nonzero`);
    an augmented assignment (``x -= d``) makes a local unsafe."""
    values: dict[str, list[ast.expr]] = {}
    unsafe: set[str] = set()
    for node in walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    values.setdefault(target.id, []).append(node.value)
                else:
                    unsafe.update(n.id for n in walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            values.setdefault(node.target.id, []).append(node.value)
        elif isinstance(node, (ast.AugAssign, ast.For)):
            unsafe.update(n.id for n in walk(node.target) if isinstance(n, ast.Name))
    safe: frozenset[str] = frozenset()
    for _ in range(3):  # chains of safe locals
        safe = frozenset(
            name
            for name, exprs in values.items()
            if name not in unsafe and all(nonzero(e, assigned, safe) for e in exprs)
        )
    return safe


def _epsilon(node: ast.expr, assigned: set[str]) -> bool:
    """A term that softens a sum: a positive literal, or an expression of parameters and
    constants only (``eps``, ``cfg.eps``, ``limit * limit``), the same for every thread."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and node.value > 0
    return not any(
        isinstance(n, (ast.Subscript, ast.Call)) or (isinstance(n, ast.Name) and n.id in assigned)
        for n in walk(node)
    )


def _zero_literal(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and node.value == 0


def hazards(
    node: ast.expr, assigned: set[str], per_thread: set[str], safe: frozenset[str] = frozenset()
) -> tuple[str, ...]:
    """The unguarded operations below ``node`` whose value or adjoint can be non-finite:
    hazard calls at a possibly-zero (or, for ``exp``/``pow``, unbounded) argument, and
    divisions by a possibly-zero denominator. ``exp(wp.min(z, c))`` is bounded; ``pow`` with
    an integer literal exponent is smooth. ``per_thread``: the names whose value varies per
    thread (locals, and the parameters of a ``@wp.func``; a kernel's scalar parameters are
    uniform over the launch)."""
    found = []
    for sub in walk(node):
        if isinstance(sub, ast.Call):
            name = call_name(sub.func)
            if name not in HAZARD_CALLS or not sub.args:
                continue
            arg = sub.args[0]
            if name == "exp":
                if isinstance(arg, ast.Call) and call_name(arg.func) in ("min", "clamp"):
                    continue
                if not varying(arg, per_thread):
                    continue
            elif name == "pow":
                if len(sub.args) == 2 and _integer_literal(sub.args[1]):
                    continue
                if nonzero(arg, assigned, safe):
                    continue
            elif nonzero(arg, assigned, safe) or not varying(arg, per_thread):
                continue
            found.append(name)
        elif (
            isinstance(sub, ast.BinOp)
            and isinstance(sub.op, ast.Div)
            and not nonzero(sub.right, assigned, safe)
            and varying(sub.right, per_thread)
        ):
            found.append("/")
    return tuple(sorted(set(found)))


def _integer_literal(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and float(node.value).is_integer()
    )


def varying(node: ast.expr, per_thread: set[str]) -> bool:
    """Whether ``node`` can vary per thread: it reads a local or an array element (a scalar
    parameter or a module constant is fixed for the launch, and carries no gradient)."""
    return any(
        isinstance(n, ast.Subscript) or (isinstance(n, ast.Name) and n.id in per_thread) for n in walk(node)
    )
