"""The abstract values of the kernel walk (see :mod:`warptrace.record.kernels`): references to
memory rooted at a parameter, the effects recorded per (root, field path), summaries of user
functions, and how Warp's types and callees are recognised and resolved."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Optional

try:  # Warp >= 1.10 keeps its implementation in warp._src
    from warp._src import codegen as _codegen
    from warp._src import types as _types
except ImportError:  # pragma: no cover - older layout
    from warp import codegen as _codegen  # type: ignore[no-redef,attr-defined]
    from warp import types as _types  # type: ignore[no-redef]

# ---------------------------------------------------------------- references and effects

ARR, STRUCT, ELEM, COPY = 0, 1, 2, 3

# (kind, root parameter index, field path, ndim for ARR, dtype/struct type)
Ref = tuple[int, int, tuple[str, ...], Optional[int], Any]

EMPTY: frozenset = frozenset()
READ, STORE, ACC = 0, 1, 2
# Not an access of its own: the line where native code (``@wp.func_native``) reached the
# memory, so its read/store marks there are a conservative guess, not a proven fact.
OPAQUE = 3
EFFECTS = (READ, STORE, ACC, OPAQUE)
NO_LINE = -1

_ATOMICS = (
    "atomic_add", "atomic_sub", "atomic_min", "atomic_max", "atomic_cas", "atomic_exch",
    "atomic_and", "atomic_or", "atomic_xor",
)  # fmt: skip
# Builtins that write through an array parameter, by parameter name.
BUILTIN_WRITES: dict[str, tuple[tuple[str, ...], int]] = {
    **{name: (("arr",), ACC) for name in _ATOMICS},
    "tile_atomic_add": (("a",), ACC),
    "tile_atomic_add_indexed": (("a",), ACC),
    "tile_store": (("a",), STORE),
    "tile_store_indexed": (("a",), STORE),
    "array_store": (("arr",), STORE),
    "dense_gemm": (("C",), STORE),
    "dense_gemm_batched": (("C",), STORE),
    "dense_chol": (("L",), STORE),
    "dense_chol_batched": (("L",), STORE),
    "dense_solve": (("x",), STORE),
    "dense_solve_batched": (("x",), STORE),
    "dense_subs": (("x",), STORE),
}
# Builtins that take an array without touching its elements (size, null test, view).
BUILTIN_NO_ACCESS = frozenset({"len", "where", "select", "view", "unot"})
# Builtins whose result may be one of their array arguments (or a view of it).
BUILTIN_PASS_THROUGH = frozenset({"where", "select"})
# Attributes of an array that are metadata, not elements.
_STRUCT_TYPE = getattr(_codegen, "Struct", None)
_is_reference = getattr(_types, "is_reference", None)


def is_struct_type(t: Any) -> bool:
    return _STRUCT_TYPE is not None and isinstance(t, _STRUCT_TYPE)


def is_array_type(t: Any) -> bool:
    try:
        return bool(_types.is_array(t))
    except Exception:
        return False


def is_ref_type(t: Any) -> bool:
    return _is_reference is not None and bool(_is_reference(t))


def struct_field_type(struct: Any, name: str) -> Any:
    var = getattr(struct, "vars", {}).get(name)
    return None if var is None else var.type


def ref_for_type(root: int, path: tuple[str, ...], t: Any) -> Optional[Ref]:
    """The reference a value of type ``t`` at ``root.path`` denotes, or None for plain values."""
    if is_array_type(t):
        return (ARR, root, path, getattr(t, "ndim", None), getattr(t, "dtype", None))
    if is_struct_type(t):
        return (STRUCT, root, path, None, t)
    return None


class Effects:
    """Per (root, path): first line of read, store, accumulate, opaque access (-1 when absent)."""

    __slots__ = ("lines",)

    def __init__(self) -> None:
        self.lines: dict[tuple[int, tuple[str, ...]], list[int]] = {}

    def add(self, root: int, path: tuple[str, ...], what: int, line: int) -> bool:
        slot = self.lines.get((root, path))
        if slot is None:
            slot = self.lines[(root, path)] = [NO_LINE, NO_LINE, NO_LINE, NO_LINE]
        old = slot[what]
        if old == NO_LINE or line < old:
            slot[what] = line
            return old == NO_LINE
        return False


@dataclass
class Summary:
    """What a call to a user function does, in terms of its parameters.

    ``custom_grad``/``custom_replay``/``native`` cover the whole call tree below it.
    """

    effects: Effects
    returns: frozenset
    custom_grad: frozenset
    custom_replay: frozenset
    native: bool
    functions: frozenset  # every user Function object reached below it (callees, custom adjoints)


EMPTY_SUMMARY = Summary(Effects(), frozenset(), frozenset(), frozenset(), False, frozenset())


class WalkContext:
    """State shared by the analysis of one kernel and all its callees."""

    def __init__(self) -> None:
        self.in_progress: set[Any] = set()


# Summaries of user functions, keyed by (Function object, parameter references).
# Shared by all kernels: a helper used by many kernels is walked once per type combination.
SUMMARIES: dict[Any, Summary] = {}


@dataclass(frozen=True)
class Choice:
    """Functions a call may reach when its callee is only known up to a container."""

    candidates: tuple[Any, ...]


def map_path(ref: Ref, subpath: tuple[str, ...]) -> tuple[int, tuple[str, ...]]:
    """Where a callee's effect on ``param.subpath`` lands for the caller's ``ref``."""
    if ref[0] in (ARR, STRUCT):
        return ref[1], ref[2] + subpath
    return ref[1], ref[2]  # through an element copy: opaque, the outer array


def is_static_call(obj: Any) -> bool:
    return (
        callable(obj)
        and getattr(obj, "__qualname__", None) == "static"
        and str(getattr(obj, "__module__", "")).startswith("warp")
    )


def closure_vars(func: Any) -> dict[str, Any]:
    result = {}
    closure = getattr(func, "__closure__", None)
    if closure:
        for name, cell in zip(func.__code__.co_freevars, closure):
            with contextlib.suppress(ValueError):
                result[name] = cell.cell_contents
    return result


def builtin_param_names(func: Any, nargs: int) -> list[str]:
    overloads = getattr(func, "overloads", None) or [func]
    for overload in overloads:
        names = list(getattr(overload, "input_types", {}).keys())
        if len(names) >= nargs:
            return names
    return list(getattr(func, "input_types", {}).keys())


def callable_overloads(func: Any) -> list[Any]:
    """Every body a call to ``func`` may run (Warp picks by type; we take the union)."""
    seen: dict[int, Any] = {id(func): func}
    for table in ("user_overloads", "user_templates"):
        for overload in (getattr(func, table, None) or {}).values():
            seen.setdefault(id(overload), overload)
    return [f for f in seen.values() if getattr(f, "adj", None) is not None]


def fits_call(func: Any, nargs: int, kwargs: dict) -> bool:
    params = [a.label for a in func.adj.args]
    return nargs <= len(params) and all(k in params for k in kwargs)
