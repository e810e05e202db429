"""WT502's measurement: run each custom adjoint (``@wp.func_grad``) against finite differences.

Called once at the end of a ``--check-numerics`` run, after the wrappers are removed (so
nothing here is recorded) and after the user's program finished (so its results and
random streams are untouched; the sampling uses its own ``numpy`` generator).

For every user function with a custom adjoint that a recorded kernel reaches, a small
test module is generated (in a temporary folder, so that Warp can read its source): a
kernel ``out[i] = F(a0[i], a1[i], ...)`` and, for each pair of arguments of the same type,
one that passes the *same* value twice (``v = a0[i]; out[i] = F(v, v, ...)``), where an
adjoint that assigns (``wp.adjoint[x] = ...``) instead of accumulating loses a term. The
adjoint comes from ``wp.Tape``; the reference is central finite differences of the same
forward function, in float64 where the function is generic over its float type
(float32 when its signature says so). Inputs are drawn from the value range the summaries
saw in the arrays the kernels read. A sample where the left and right one-sided
differences disagree sits on a kink (``abs``, ``max``, a ``wp.where``) and is skipped.

Only scalar float arguments are handled; any other signature gets an ``error`` entry
saying why it was not checked. The result is a list of dicts (see ``meta.json
numerics.adjoint_checks`` in :mod:`warptrace.trace.schema`).
"""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import warp as wp
import warp._src.context as _context

from warptrace.kernel_source.widen import float64_copy
from warptrace.record.kernel_refs import closure_vars

SAMPLES = 24
_SETTINGS = {  # precision -> (relative FD step, kink tolerance, absolute floor)
    "float64": (1e-6, 1e-3, 1e-9),
    "float32": (1e-2, 5e-2, 1e-3),
}
_FLOAT_TYPES: dict[Any, str] = {
    float: "float32",
    wp.float32: "float32",
    wp.float64: "float64",
    wp.float16: "float32",
}
_WP_NAME = {"float32": "wp.float32", "float64": "wp.float64"}
# the float32 adjoint against float64 differences: the adjoint's own rounding (~1e-7) is the floor


def check_custom_adjoints(custom: dict[int, tuple[Any, list[tuple[float, float]]]]) -> list[dict[str, Any]]:
    """One check per custom adjoint reached by the given kernels (kernel_id -> (kernel, input ranges))."""
    found: dict[int, tuple[Any, list[int], list[tuple[float, float]]]] = {}
    for kernel_id, (kernel, ranges) in sorted(custom.items()):
        for func in _custom_grad_functions(kernel):
            entry = found.setdefault(id(func), (func, [], []))
            entry[1].append(kernel_id)
            entry[2].extend(ranges)
    results = []
    with tempfile.TemporaryDirectory(prefix="warptrace-adjoint-") as folder:
        for number, (func, kernel_ids, ranges) in enumerate(found.values()):
            result = _describe(func, kernel_ids)
            try:
                result.update(_check(func, ranges, Path(folder), number))
            except Exception as exc:
                result["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[
                    :300
                ]
            results.append(result)
    return results


def _custom_grad_functions(kernel: Any) -> list[Any]:
    """User functions with a custom adjoint that the kernel's code can name (its globals and
    closure, and the globals of the user functions found there, two levels deep)."""
    function_class = _context.Function
    seen: dict[int, Any] = {}
    python = getattr(kernel, "func", None)
    scopes = [_scope_of(python)]
    for _depth in range(3):
        next_scopes = []
        for scope in scopes:
            for value in scope.values():
                if isinstance(value, function_class) and id(value) not in seen:
                    seen[id(value)] = value
                    next_scopes.append(_scope_of(getattr(value, "func", None)))
        scopes = next_scopes
    return [f for f in seen.values() if getattr(f, "custom_grad_func", None) is not None]


def _scope_of(python: Any) -> dict[str, Any]:
    """Globals and closure values of a Python function; empty for a Warp builtin (no ``func``)."""
    return {**(getattr(python, "__globals__", None) or {}), **closure_vars(python)}


def _describe(func: Any, kernel_ids: list[int]) -> dict[str, Any]:
    python = getattr(func, "func", None)
    code = getattr(python, "__code__", None)
    grad = getattr(getattr(func, "custom_grad_func", None), "func", None)
    grad_code = getattr(grad, "__code__", None)
    return {
        "func": str(getattr(python, "__name__", func.key)),
        "file": str(getattr(code, "co_filename", "")),
        "line": int(getattr(code, "co_firstlineno", -1)) + _decorator_lines(python),
        "grad_func": str(getattr(grad, "__name__", "")),
        "grad_file": str(getattr(grad_code, "co_filename", "")),
        "grad_line": int(getattr(grad_code, "co_firstlineno", -1)) + _decorator_lines(grad),
        "kernel_ids": sorted(set(kernel_ids)),
        "precision": None,
        "samples": 0,
        "skipped_kinks": 0,
        "worst_rel_error": None,
        "worst_case": None,
        "worst_input": None,
        "worst_arg": None,
        "custom": None,
        "finite_difference": None,
        "error": None,
    }


def _decorator_lines(python: Any) -> int:
    """Lines from the first decorator to the ``def`` (co_firstlineno names the decorator)."""
    try:
        lines, _ = inspect.getsourcelines(python)
    except (OSError, TypeError):
        return 0
    for offset, text in enumerate(lines):
        if text.lstrip().startswith("def "):
            return offset
    return 0


def _types(func: Any) -> list[str]:
    """The float type name of each argument (only scalar floats are handled)."""
    names = []
    for annotation in func.input_types.values():
        if annotation not in _FLOAT_TYPES:
            raise TypeError(
                f"argument type {getattr(annotation, '__name__', annotation)} is not a scalar float"
            )
        names.append(_FLOAT_TYPES[annotation])
    return names


def _widened_source(func: Any) -> str:
    """Source of a float64 copy of the user's forward function, named ``F64``."""
    text = float64_copy(inspect.getsource(func.func), "F64")
    if text is None:
        raise TypeError("no function source")
    return text


def _source(function: str, types: list[str], out: str, pairs: list[tuple[int, int]], prefix: str = "") -> str:
    """A test module: ``distinct`` (``out[i] = F(a0[i], ...)``) and a ``repeated_j_k`` kernel per pair."""
    n = len(types)
    params = ", ".join(f"a{j}: wp.array(dtype={_WP_NAME[t]})" for j, t in enumerate(types))
    lines = ["import warp as wp", "", prefix, ""]
    call = ", ".join(f"a{j}[i]" for j in range(n))
    lines += [
        "@wp.kernel",
        f"def distinct({params}, out: wp.array(dtype={_WP_NAME[out]})):",
        "    i = wp.tid()",
    ]
    lines += [f"    out[i] = {function}({call})", ""]
    for j, k in pairs:
        args = ", ".join("v" if m in (j, k) else f"a{m}[i]" for m in range(n))
        lines += ["@wp.kernel", f"def repeated_{j}_{k}({params}, out: wp.array(dtype={_WP_NAME[out]})):"]
        lines += ["    i = wp.tid()", f"    v = a{j}[i]", f"    out[i] = {function}({args})", ""]
    return "\n".join(lines)


def _load(folder: Path, name: str, text: str, scope: dict[str, Any]) -> Any:
    path = folder / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    module.__dict__.update(scope)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _check(func: Any, ranges: list[tuple[float, float]], folder: Path, number: int) -> dict[str, Any]:
    types = _types(func)
    n = len(types)
    if n == 0:
        raise TypeError("no arguments")
    own = "float32" if "float32" in types else "float64"
    pairs = [(j, k) for j, k in itertools.combinations(range(n), 2) if types[j] == types[k]]
    user_scope = {k: v for k, v in func.func.__globals__.items() if not k.startswith("__")}
    adjoint_module = _load(
        folder, f"warptrace_adjoint_{number}", _source("F", types, own, pairs), {**user_scope, "F": func}
    )
    precision, fd_module = own, adjoint_module
    if own != "float64":  # finite differences of a float64 copy of the forward function, when it compiles
        try:
            text = _source("F64", ["float64"] * n, "float64", pairs, _widened_source(func))
            widened = _load(folder, f"warptrace_fd64_{number}", text, user_scope)
            _forward(widened.distinct, np.zeros((n, 1)), ["float64"] * n, "float64")
            precision, fd_module = "float64", widened
        except Exception:
            precision, fd_module = own, adjoint_module
    fd_types = ["float64"] * n if precision == "float64" and own != "float64" else types
    step, kink_tol, floor_own = _SETTINGS[precision]
    rng = np.random.default_rng(12345)
    lo = min((r[0] for r in ranges), default=-1.0)
    hi = max((r[1] for r in ranges), default=1.0)
    if not np.isfinite(lo) or not np.isfinite(hi) or hi - lo < 1e-6 * max(1.0, abs(lo)):
        width = 0.5 * max(1.0, abs(lo) if np.isfinite(lo) else 1.0)
        lo, hi = (lo if np.isfinite(lo) else 0.0) - width, (hi if np.isfinite(hi) else 0.0) + width
    x = rng.uniform(lo, hi, size=(n, SAMPLES))
    if own == "float32":
        x = x.astype(np.float32).astype(np.float64)  # the points the float32 adjoint sees exactly
    best: dict[str, Any] = {"worst_rel_error": 0.0}
    samples = skipped = 0
    cases: list[tuple[str, str, list[int]]] = [("distinct", "distinct", list(range(n)))]
    cases += [("repeated", f"repeated_{j}_{k}", [j, k]) for j, k in pairs]
    for case, kernel_name, tied in cases:
        xs = x.copy()
        if case == "repeated":
            xs[tied[1]] = xs[tied[0]]
        grads = _adjoint(getattr(adjoint_module, kernel_name), xs, types, own)
        fd_kernel = getattr(fd_module, kernel_name)
        fd_out = precision
        f0 = _forward(fd_kernel, xs, fd_types, fd_out)
        for j in range(n) if case == "distinct" else tied[:1]:
            moved = [j] if case == "distinct" else tied
            h = step * np.maximum(1.0, np.abs(xs[j]))
            up, down = xs.copy(), xs.copy()
            for m in moved:
                up[m] += h
                down[m] -= h
            f_up = _forward(fd_kernel, up, fd_types, fd_out)
            f_down = _forward(fd_kernel, down, fd_types, fd_out)
            h = (up[j] - down[j]) / 2  # the step actually taken in the argument's precision
            fd = (f_up - f_down) / (2 * h)
            right, left = (f_up - f0) / h, (f0 - f_down) / h
            kink = np.abs(right - left) > kink_tol * np.maximum(1.0, np.maximum(np.abs(right), np.abs(left)))
            ok = np.isfinite(fd) & np.isfinite(grads[j]) & np.isfinite(f0) & ~kink
            skipped += int(np.count_nonzero(kink))
            samples += int(np.count_nonzero(ok))
            diff = np.abs(grads[j] - fd)
            finite_fd = np.abs(fd[ok])
            floor = (1e-5 if own == "float32" else floor_own) * max(
                1.0, float(finite_fd.max()) if finite_fd.size else 1.0
            )
            scale = np.maximum(np.maximum(np.abs(fd), np.abs(grads[j])), floor)
            rel = np.where(ok & (diff > floor), diff / scale, 0.0)
            s = int(np.argmax(rel)) if rel.size else 0
            if rel.size and float(rel[s]) > best["worst_rel_error"]:
                best = {
                    "worst_rel_error": float(rel[s]),
                    "worst_case": case,
                    "worst_input": [float(v) for v in xs[:, s]],
                    "worst_arg": str(list(func.input_types)[j]),
                    "custom": float(grads[j][s]),
                    "finite_difference": float(fd[s]),
                }
    return {"precision": precision, "samples": samples, "skipped_kinks": skipped, **best}


def _arrays(xs: np.ndarray, types: list[str], grad: bool) -> list[Any]:
    dtypes = {"float32": wp.float32, "float64": wp.float64}
    return [wp.array(xs[j], dtype=dtypes[t], device="cpu", requires_grad=grad) for j, t in enumerate(types)]


def _forward(kernel: Any, xs: np.ndarray, types: list[str], out_type: str) -> np.ndarray:
    inputs = _arrays(xs, types, False)
    out = wp.zeros(xs.shape[1], dtype=wp.float64 if out_type == "float64" else wp.float32, device="cpu")
    wp.launch(kernel, dim=xs.shape[1], inputs=[*inputs, out], device="cpu")
    return out.numpy().astype(np.float64)


def _adjoint(kernel: Any, xs: np.ndarray, types: list[str], out_type: str) -> list[np.ndarray]:
    inputs = _arrays(xs, types, True)
    dtype = wp.float64 if out_type == "float64" else wp.float32
    out = wp.zeros(xs.shape[1], dtype=dtype, device="cpu", requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, dim=xs.shape[1], inputs=[*inputs, out], device="cpu")
    tape.backward(grads={out: wp.ones(xs.shape[1], dtype=dtype, device="cpu")})
    return [a.grad.numpy().astype(np.float64) for a in inputs]


__all__ = ["check_custom_adjoints"]
