"""Warp's own tests, plainly and under warptrace: the recorder must not change an outcome.

    python tools/check_warp_suite.py                          # the default CPU list
    python tools/check_warp_suite.py test_tape test_copy --timeout 600
    python tools/check_warp_suite.py --analyze --json out.json
    python tools/check_warp_suite.py --extended --traced-only --analyze   # 48 more modules
    python tools/check_warp_suite.py --check-numerics --analyze   # traced with value summaries
    python tools/check_warp_suite.py --all --analyze --jobs 2 --timeout 3600 \\
        --out /tmp/suite.wtraces --json /tmp/suite.json --markdown docs/validation-warp-suite.md

Each module runs as ``python -m unittest -v warp.tests.MODULE`` and as
``python -m warptrace -q --no-analyze -o OUT/MODULE.wtrace -m unittest -v
warp.tests.MODULE`` (plain first, then traced, so machine load hits both alike). Per
module it reports tests run, failures, errors and skips of both runs, the tests whose
outcome differs, and both wall times. Names may be dotted (``matrix.test_mat_lite``).
``--all`` runs every ``warp.tests`` module of the installed Warp except those in
:data:`SKIPPED` (each with the reason: it needs a GPU, a display or a network).

The runs use a kernel cache of their own under ``--out`` (``WARP_CACHE_PATH``), so a
test that clears Warp's kernel cache never clears the one other processes use; the
modules of :data:`CLEARS_CACHE` get one cache each. ``--jobs N`` runs N modules at a
time (each module's plain and traced runs stay one after the other).

The traces are kept under ``--out``; ``--analyze`` runs ``python -m warptrace analyze
--format json`` on each and counts the findings by code and severity (error and warning
findings are listed with their location and, when ``warp_suite_verdicts.py`` holds one,
their verdict). ``--reanalyze JSON`` takes the outcomes from an earlier ``--json`` and
only analyzes the traces again (after a rule changed). ``--markdown PATH`` writes the
tables (outcomes, findings with verdicts, modules left out) into PATH between the lines
``<!-- warp-suite:begin -->`` and ``<!-- warp-suite:end -->`` (the whole file when it
has no such lines). Exit status: 0 when every module has the same outcome plain and
traced (with ``--traced-only``: when every traced run passes), 1 otherwise, 2 on bad
arguments.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

if str(Path(__file__).resolve().parent) not in sys.path:  # run as a script, sys.path[0] is it
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from warp_suite_verdicts import SKIPPED, VERDICTS

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

# Modules whose tests clear Warp's kernel cache (``wp.clear_kernel_cache()``, a fresh
# cache folder): each gets a cache of its own, so they never clear one another module uses.
CLEARS_CACHE = frozenset(
    {"test_kernel_cache", "test_cpu_precompiled_headers", "test_cpu_block_codegen", "test_examples"}
)

_RAN = re.compile(r"^Ran (\d+) tests? in ([\d.]+)s", re.MULTILINE)
_SUMMARY = re.compile(r"^(OK|FAILED)(?: \(([^)]*)\))?\s*$", re.MULTILINE)
_PROBLEM = re.compile(r"^(FAIL|ERROR): (\S+) \(([^)]+)\)", re.MULTILINE)
_SKIP = re.compile(r"\.\.\. skipped ['\"](.*)['\"]$", re.MULTILINE)
BEGIN, END = "<!-- warp-suite:begin -->", "<!-- warp-suite:end -->"


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
    skip_reasons: dict[str, int] = field(default_factory=dict)  # reason -> tests skipped for it
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
    outcome.skip_reasons = dict(Counter(_SKIP.findall(output)))
    for kind, test, where in _PROBLEM.findall(output):
        outcome.problems[
            f"{where.rsplit('.', 1)[0]}.{test}" if where.endswith(test) else f"{where}.{test}"
        ] = kind
    return outcome


def run(command: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None) -> Outcome:
    start = time.perf_counter()
    try:
        proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
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
    """Findings of one trace: counts by code and severity, and every error and warning."""
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
    listed = [
        {
            "code": f["code"],
            "severity": f["severity"],
            "message": f["message"],
            "file": f.get("location", {}).get("file"),
            "line": f.get("location", {}).get("line"),
            "function": f.get("location", {}).get("function"),
            "text": f.get("location", {}).get("text"),
        }
        for f in findings
        if f["severity"] in ("error", "warning")
    ]
    return {
        "status": "ok",
        "wall_s": wall_s,
        "summary": report.get("summary", {}),
        "by_code": dict(sorted(by_code.items())),
        "errors": [f for f in listed if f["severity"] == "error"],
        "warnings": [f for f in listed if f["severity"] == "warning"],
    }


def verdict(finding: dict[str, Any]) -> str:
    """The recorded verdict of an error or warning finding ("unjudged" when none is)."""
    name = Path(finding.get("file") or "").name
    return VERDICTS.get((finding["code"], name, finding.get("line")), "unjudged")


def all_modules() -> list[str]:
    """Every ``test_*`` module of the installed ``warp.tests``, dotted below it, sorted."""
    spec = importlib.util.find_spec("warp.tests")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("check_warp_suite: warp.tests is not installed")
    root = Path(next(iter(spec.submodule_search_locations)))
    return sorted(".".join(path.relative_to(root).with_suffix("").parts) for path in root.rglob("test_*.py"))


def _cell(outcome: Outcome) -> str:
    extra = f" x{outcome.expected_failures}" if outcome.expected_failures else ""
    return (
        f"{outcome.status:7} {outcome.tests:4} run {outcome.failures:2} F {outcome.errors:2} E "
        f"{outcome.skipped:3} S{extra} {outcome.wall_s:7.1f}s"
    )


def check_module(
    module: str, args: argparse.Namespace, out: Path, previous: dict[str, Any]
) -> dict[str, Any]:
    """Plain and traced runs of one module (or the outcomes of ``previous``), then the analysis."""
    target = f"warp.tests.{module}"
    trace = out / f"{module}.wtrace"
    if previous:
        plain, traced = Outcome(**previous["plain"]), Outcome(**previous["traced"])
    else:
        env = dict(os.environ)
        cache = out / ("kernel-cache-" + module if module in CLEARS_CACHE else "kernel-cache")
        env["WARP_CACHE_PATH"] = str(cache)
        plain = Outcome(status="skipped")
        if not args.traced_only:
            plain = run([sys.executable, "-m", "unittest", "-v", target], out, args.timeout, env)
        command = [sys.executable, "-m", "warptrace", "-q", "--no-analyze", "-o", str(trace)]
        command += ["--check-numerics"] if args.check_numerics else []
        traced = run([*command, "-m", "unittest", "-v", target], out, args.timeout, env)
        (out / f"{module}.plain.log").write_text(plain.tail)
        (out / f"{module}.traced.log").write_text(traced.tail)
    # --traced-only compares nothing: a traced run must pass on its own (no failure, no error)
    same = traced.status == "OK" if args.traced_only else plain.same_as(traced)
    entry: dict[str, Any] = {
        "plain": asdict(plain),
        "traced": asdict(traced),
        "same": None if args.traced_only else same,
    }
    if not same:
        changed = sorted(set(plain.problems.items()) ^ set(traced.problems.items()))
        entry["differences"] = [
            f"{test}: plain {plain.problems.get(test, 'ok')}, traced {traced.problems.get(test, 'ok')}"
            for test in sorted({t for t, _ in changed})
        ]
    if args.analyze:
        entry["analysis"] = analyze(trace, out, args.timeout)
    return entry


def report_line(module: str, entry: dict[str, Any], traced_only: bool) -> str:
    plain, traced = Outcome(**entry["plain"]), Outcome(**entry["traced"])
    same = traced.status == "OK" if traced_only else entry["same"]
    verdict_text = ("-" if same else "FAILED") if traced_only else ("yes" if same else "NO")
    line = f"{module:40} {_cell(plain):44} | {_cell(traced):44} | {verdict_text}"
    line += "".join(f"\n    {d}" for d in entry.get("differences", []))
    found = entry.get("analysis")
    if found and found["status"] == "ok":
        counts = ", ".join(f"{k}: {v}" for k, v in found["by_code"].items()) or "no findings"
        line += f"\n    findings ({found['wall_s']:.1f}s): {counts}"
        for f in found["errors"] + found.get("warnings", []):
            line += (
                f"\n    {f['severity'].upper()} {f['code']} {f['file']}:{f['line']} {f['function']}: "
                f"{f['text']} [{verdict(f)}]"
            )
    elif found:
        why = (found.get("stderr") or "").strip().splitlines()[-1:]
        line += f"\n    analysis: {found['status']} {' '.join(why)}"
    return line


def _outcome_md(o: dict[str, Any]) -> str:
    parts = [f"{o['tests']} run"]
    for key, label in (
        ("failures", "F"),
        ("errors", "E"),
        ("skipped", "skipped"),
        ("expected_failures", "xfail"),
    ):
        if o[key]:
            parts.append(f"{o[key]} {label}")
    reasons = o.get("skip_reasons") or {}
    if o["tests"] and o["skipped"] == o["tests"] and reasons:  # nothing ran: say why
        parts[-1] += ": " + max(reasons, key=reasons.__getitem__).replace("|", "\\|")
    return f"{o['status']} ({', '.join(parts)})"


def markdown(results: dict[str, Any], meta: dict[str, Any]) -> str:
    """The tables of the validation page: outcomes, error and warning findings, modules left out."""
    rows = [
        "| module | tests | plain | traced | same | error | warning | info |",
        "|---|---:|---|---|---|---:|---:|---:|",
    ]
    listed: list[tuple[str, dict[str, Any]]] = []
    totals: Counter[str] = Counter()
    for module, entry in results.items():
        found = entry.get("analysis") or {}
        severities: Counter[str] = Counter()
        for key, count in found.get("by_code", {}).items():
            severities[key.split()[1]] += count
            totals[key] += count
        same = {True: "yes", False: "**NO**", None: "-"}[entry["same"]]
        analysis = "" if found.get("status", "ok") == "ok" else f" (analysis: {found['status']})"
        rows.append(
            f"| {module} | {entry['traced']['tests']} | {_outcome_md(entry['plain'])} | "
            f"{_outcome_md(entry['traced'])}{analysis} | {same} | {severities['error']} | "
            f"{severities['warning']} | {severities['info']} |"
        )
        listed += [(module, f) for f in found.get("errors", []) + found.get("warnings", [])]
    text = [
        f"Warp {meta.get('warp', '?')}, {len(results)} modules, "
        f"{sum(e['traced']['tests'] for e in results.values())} tests; "
        f"same outcome plain and traced in {sum(bool(e['same']) for e in results.values())} of {len(results)}; "
        f"wall time {meta.get('wall_s', 0.0) / 60:.0f} min ({meta.get('jobs', 1)} at a time, "
        f"{meta.get('cpus', '?')} CPUs shared with other work)"
        + (f"; {meta['note']}." if meta.get("note") else "."),
        "",
        *rows,
        "",
        "Findings over all modules: "
        + (", ".join(f"{k}: {v}" for k, v in sorted(totals.items())) or "none")
        + ".",
        "",
        "Every error and warning finding, with its verdict:",
        "",
        "| module | code | severity | location | line | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for module, f in listed:
        code_text = (f.get("text") or "").strip().replace("|", "\\|")
        text.append(
            f"| {module} | {f['code']} | {f['severity']} | {Path(f.get('file') or '').name}:{f.get('line')} "
            f"`{f.get('function')}` | `{code_text}` | {verdict(f)} |"
        )
    skipped = meta.get("skipped", {})
    if skipped:
        text += ["", "Modules left out (not run on the CPU):", "", "| module | reason |", "|---|---|"]
        text += [f"| {module} | {reason} |" for module, reason in sorted(skipped.items())]
    return "\n".join(text) + "\n"


def write_markdown(path: Path, table: str) -> None:
    old = path.read_text() if path.exists() else ""
    if BEGIN in old and END in old:
        head, _, rest = old.partition(BEGIN)
        _, _, tail = rest.partition(END)
        path.write_text(f"{head}{BEGIN}\n{table}{END}{tail}")
    else:
        path.write_text(f"{BEGIN}\n{table}{END}\n")


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
    parser.add_argument("--markdown", type=Path, help="write the tables into this Markdown page")
    parser.add_argument("--jobs", type=int, default=1, help="modules run at a time (default 1)")
    parser.add_argument(
        "--reanalyze", type=Path, help="take the outcomes from this --json file and only analyze again"
    )
    parser.add_argument(
        "--check-numerics",
        action="store_true",
        help="record the traced runs with --check-numerics (value summaries: the WT5xx rules)",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--extended",
        action="store_true",
        help="the 48 more modules of EXTENDED_MODULES instead of the default list",
    )
    which.add_argument("--all", action="store_true", help="every warp.tests module but those SKIPPED lists")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    previous: dict[str, Any] = {}
    if args.reanalyze:
        try:
            previous = json.loads(args.reanalyze.read_text())["modules"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            parser.error(f"--reanalyze {args.reanalyze}: not a --json file of this tool ({exc})")
    skipped: dict[str, str] = {}
    if args.modules:
        modules = [m.removeprefix("warp.tests.") for m in args.modules]
    elif args.reanalyze:
        modules = list(previous)
    elif args.all:
        modules = [m for m in all_modules() if m not in SKIPPED]
        skipped = {m: SKIPPED[m] for m in all_modules() if m in SKIPPED}
    else:
        modules = list(EXTENDED_MODULES if args.extended else DEFAULT_MODULES)
    missing = [m for m in modules if args.reanalyze and m not in previous]
    if missing:
        parser.error(f"--reanalyze: no outcome for {', '.join(missing)}")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)

    start = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    lock = threading.Lock()
    print(f"{'module':40} {'plain':44} | {'traced':44} | same", flush=True)

    def one(module: str) -> None:
        entry = check_module(module, args, out, previous.get(module, {}))
        with lock:
            results[module] = entry
            print(report_line(module, entry, args.traced_only), flush=True)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for future in [pool.submit(one, m) for m in modules]:
            future.result()
    results = {m: results[m] for m in modules}
    wall_s = time.perf_counter() - start
    differing = sum(
        not (e["traced"]["status"] == "OK" if args.traced_only else e["same"]) for e in results.values()
    )

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
    print(f"wall time {wall_s:.0f} s ({args.jobs} at a time)")
    earlier = json.loads(args.reanalyze.read_text()) if args.reanalyze else {}
    meta = {
        "warp": importlib.metadata.version("warp-lang"),
        "wall_s": earlier.get("wall_s", wall_s),
        "jobs": earlier.get("jobs", args.jobs),
        "cpus": earlier.get("cpus", os.cpu_count()),
        "skipped": skipped or earlier.get("skipped", {}),
        "note": earlier.get("note", ""),  # how the outcomes came about, when not one run
    }
    if args.json:
        args.json.write_text(json.dumps({**meta, "modules": results}, indent=2))
    if args.markdown:
        write_markdown(args.markdown, markdown(results, meta))
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
