"""Warp's own tests, plainly and under warptrace: the recorder must not change an outcome.

    python tools/check_warp_suite.py                          # the default CPU list
    python tools/check_warp_suite.py test_tape test_copy --timeout 600
    python tools/check_warp_suite.py --analyze --json out.json
    python tools/check_warp_suite.py --extended --traced-only --analyze   # 48 more modules
    python tools/check_warp_suite.py --check-numerics --analyze   # traced with value summaries

Each module runs as ``python -m unittest -v warp.tests.MODULE`` and as
``python -m warptrace -q --no-analyze -o OUT/MODULE.wtrace -m unittest -v
warp.tests.MODULE`` (plain first, then traced, module after module, so machine load
hits both alike). Per module it reports tests run, failures, errors and skips of both
runs, the tests whose outcome differs, and both wall times. Names may be dotted (``matrix.test_mat_lite``). The traces are kept under
``--out``; ``--analyze`` runs ``python -m warptrace analyze --format json`` on each and
counts the findings by code and severity (error findings are listed with their
location). Exit status: 0 when every module has the same outcome plain and traced
(with ``--traced-only``: when every traced run passes), 1 otherwise, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# CPU-runnable modules that finish within a few minutes each (Warp 1.19).
DEFAULT_MODULES = (
    "test_tape", "test_overwrite", "test_grad_debug", "test_grad_customs", "test_adam", "test_sgd",
    "test_copy", "test_launch", "test_lerp", "test_smoothstep", "test_indexedarray", "test_fabricarray",
    "test_array_reduce", "test_runlength_encode", "test_fixedarray", "test_struct", "test_func",
    "test_generics", "test_composite_component_adjoint", "test_conditional", "test_lvalue", "test_grad",
    "test_array", "test_atomic", "test_spatial", "test_quat", "test_vec_lite", "matrix.test_mat_lite",
    "test_codegen", "test_math",
)  # fmt: skip

# More CPU-runnable modules with gradients, tried after the default list (docs/validation.md,
# docs/dev/performance-history.md: "48 more modules"); a few minutes each at most, most much
# less once Warp's kernel cache is warm.
EXTENDED_MODULES = (
    "deterministic.test_deterministic_backward", "test_apic", "test_arithmetic", "test_array_subclass",
    "test_codegen_continue", "test_cpu_block_dim", "test_fast_math", "test_fp16", "test_implicit_init",
    "test_map", "test_noise", "test_options", "test_sparse", "test_vec", "geometry.test_mesh_query_point",
    "geometry.test_mesh_query_ray", "geometry.test_volume", "tile.test_tile", "tile.test_tile_mlp",
    "tile.test_tile_load", "fem.test_fem_linalg", "fem.test_fem_quadrature", "geometry.test_marching_cubes",
    "geometry.test_surface_nets", "matrix.test_mat_constructors", "matrix.test_mat_elementwise_ops",
    "matrix.test_mat_linalg", "tile.test_tile_reduce", "tile.test_tile_matmul", "tile.test_tile_view",
    "tile.test_tile_construction", "tile.test_tile_load_indexed", "tile.test_tile_fused_ops",
    "test_vec_constructors", "test_bf16", "test_cpu_vectorization", "fem.test_fem_integrate",
    "tile.test_tile_cholesky", "tile.test_tile_fft", "tile.test_tile_solve", "tile.test_tile_shared_memory",
    "geometry.test_sparse_marching_cubes", "matrix.test_mat_assign_copy", "matrix.test_mat_basics",
    "tile.test_tile_composite_row", "tile.test_tile_func_arg", "tile.test_tile_load_extract", "tile.test_tile_empty",
)  # fmt: skip

_RAN = re.compile(r"^Ran (\d+) tests? in ([\d.]+)s", re.MULTILINE)
_SUMMARY = re.compile(r"^(OK|FAILED)(?: \(([^)]*)\))?\s*$", re.MULTILINE)
_PROBLEM = re.compile(r"^(FAIL|ERROR): (\S+) \(([^)]+)\)", re.MULTILINE)


@dataclass
class Outcome:
    """One unittest run of one module."""

    status: str = "missing"  # OK / FAILED / timeout / crashed (no summary line)
    exit_code: int | None = None
    tests: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    expected_failures: int = 0
    unexpected_successes: int = 0
    wall_s: float = 0.0
    problems: dict[str, str] = field(default_factory=dict)  # test id -> FAIL / ERROR
    tail: str = ""

    def same_as(self, other: Outcome) -> bool:
        keys = (
            "status",
            "tests",
            "failures",
            "errors",
            "skipped",
            "expected_failures",
            "unexpected_successes",
        )
        return all(getattr(self, k) == getattr(other, k) for k in keys) and self.problems == other.problems


def parse(output: str) -> Outcome:
    """Counts from ``python -m unittest`` output (its last summary wins)."""
    outcome = Outcome()
    ran = _RAN.findall(output)
    if ran:
        outcome.tests = int(ran[-1][0])
    summary = _SUMMARY.findall(output)
    if summary:
        outcome.status = summary[-1][0]
        for part in (summary[-1][1] or "").split(","):
            name, _, value = part.strip().partition("=")
            if value.isdigit():
                attr = {
                    "expected failures": "expected_failures",
                    "unexpected successes": "unexpected_successes",
                }
                setattr(outcome, attr.get(name, name), int(value))
    else:
        outcome.status = "crashed"
    for kind, test, where in _PROBLEM.findall(output):
        outcome.problems[
            f"{where.rsplit('.', 1)[0]}.{test}" if where.endswith(test) else f"{where}.{test}"
        ] = kind
    return outcome


def run(command: list[str], cwd: Path, timeout: float) -> Outcome:
    start = time.perf_counter()
    try:
        proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout)
        output = proc.stdout + proc.stderr
        outcome = parse(output)
        outcome.exit_code = proc.returncode
    except subprocess.TimeoutExpired as exc:
        output = _text(exc.stdout) + _text(exc.stderr)
        outcome = parse(output)
        outcome.status = "timeout"
    outcome.wall_s = time.perf_counter() - start
    outcome.tail = output[-3000:]
    return outcome


def _text(data: Any) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else str(data)


def analyze(trace: Path, cwd: Path, timeout: float) -> dict[str, Any]:
    """Findings of one trace: counts by code and severity, and every error finding."""
    if not trace.is_dir():
        return {"status": "no trace"}
    command = [
        sys.executable,
        "-m",
        "warptrace",
        "analyze",
        str(trace),
        "--format",
        "json",
        "--fail-on",
        "info",
    ]
    start = time.perf_counter()
    try:
        proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "wall_s": time.perf_counter() - start}
    wall_s = time.perf_counter() - start
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"status": f"exit {proc.returncode}", "wall_s": wall_s, "stderr": proc.stderr[-2000:]}
    findings = report.get("findings", [])
    by_code = Counter(f"{f['code']} {f['severity']}" for f in findings)
    errors = [
        {
            "code": f["code"],
            "message": f["message"],
            "file": f.get("location", {}).get("file"),
            "line": f.get("location", {}).get("line"),
            "function": f.get("location", {}).get("function"),
            "text": f.get("location", {}).get("text"),
        }
        for f in findings
        if f["severity"] == "error"
    ]
    return {
        "status": "ok",
        "wall_s": wall_s,
        "summary": report.get("summary", {}),
        "by_code": dict(sorted(by_code.items())),
        "errors": errors,
    }


def _cell(outcome: Outcome) -> str:
    extra = f" x{outcome.expected_failures}" if outcome.expected_failures else ""
    return (
        f"{outcome.status:7} {outcome.tests:4} run {outcome.failures:2} F {outcome.errors:2} E "
        f"{outcome.skipped:3} S{extra} {outcome.wall_s:7.1f}s"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="warp.tests module names (default: a CPU list)")
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds per module and run (default 300)"
    )
    parser.add_argument(
        "--out", type=Path, default=Path("warp-suite.wtraces"), help="folder for traces and logs"
    )
    parser.add_argument("--analyze", action="store_true", help="analyze each trace and count findings")
    parser.add_argument("--traced-only", action="store_true", help="skip the plain runs")
    parser.add_argument("--json", type=Path, help="write the full results here")
    parser.add_argument(
        "--check-numerics",
        action="store_true",
        help="record the traced runs with --check-numerics (value summaries: the WT5xx rules)",
    )
    parser.add_argument(
        "--extended",
        action="store_true",
        help="the 48 more modules of EXTENDED_MODULES instead of the default list",
    )
    args = parser.parse_args(argv)
    default = EXTENDED_MODULES if args.extended else DEFAULT_MODULES
    modules = [m.removeprefix("warp.tests.") for m in (args.modules or default)]
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)

    results: dict[str, dict[str, Any]] = {}
    differing = 0
    print(f"{'module':24} {'plain':44} | {'traced':44} | same", flush=True)
    for module in modules:
        target = f"warp.tests.{module}"
        plain = Outcome(status="skipped")
        if not args.traced_only:
            plain = run([sys.executable, "-m", "unittest", "-v", target], out, args.timeout)
        trace = out / f"{module}.wtrace"
        traced = run(
            [
                sys.executable,
                "-m",
                "warptrace",
                "-q",
                "--no-analyze",
                "-o",
                str(trace),
                *(["--check-numerics"] if args.check_numerics else []),
                "-m",
                "unittest",
                "-v",
                target,
            ],
            out,
            args.timeout,
        )
        (out / f"{module}.plain.log").write_text(plain.tail)
        (out / f"{module}.traced.log").write_text(traced.tail)
        # --traced-only compares nothing: a traced run must pass on its own (no failure, no error)
        same = traced.status == "OK" if args.traced_only else plain.same_as(traced)
        differing += not same
        entry: dict[str, Any] = {
            "plain": asdict(plain),
            "traced": asdict(traced),
            "same": None if args.traced_only else same,
        }
        verdict = ("-" if same else "FAILED") if args.traced_only else ("yes" if same else "NO")
        line = f"{module:24} {_cell(plain):44} | {_cell(traced):44} | {verdict}"
        if not same:
            changed = sorted(set(plain.problems.items()) ^ set(traced.problems.items()))
            entry["differences"] = [f"{test}: plain {plain.problems.get(test, 'ok')}, traced {traced.problems.get(test, 'ok')}"
                                    for test in sorted({t for t, _ in changed})]  # fmt: skip
            line += "".join(f"\n    {d}" for d in entry["differences"])
        if args.analyze:
            entry["analysis"] = found = analyze(trace, out, args.timeout)
            if found["status"] == "ok":
                counts = ", ".join(f"{k}: {v}" for k, v in found["by_code"].items()) or "no findings"
                line += f"\n    findings ({found['wall_s']:.1f}s): {counts}"
                for error in found["errors"]:
                    line += f"\n    ERROR {error['code']} {error['file']}:{error['line']} {error['function']}: {error['text']}"
            else:
                why = (found.get("stderr") or "").strip().splitlines()[-1:]
                line += f"\n    analysis: {found['status']} {' '.join(why)}"
        results[module] = entry
        print(line, flush=True)

    if args.analyze:
        total: Counter[str] = Counter()
        for entry in results.values():
            total.update(entry.get("analysis", {}).get("by_code", {}))
        print(
            "findings over all modules: "
            + (", ".join(f"{k}: {v}" for k, v in sorted(total.items())) or "none")
        )
    if args.traced_only:
        print(f"{len(modules) - differing} of {len(modules)} modules pass traced (no plain runs to compare)")
    else:
        print(f"{len(modules) - differing} of {len(modules)} modules: same outcome plain and traced")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
