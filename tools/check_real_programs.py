"""Run real Warp programs nobody here wrote, plainly and under warptrace, and compare.

    python tools/check_real_programs.py                 # every program not marked slow
    python tools/check_real_programs.py --all           # including the slow ones
    python tools/check_real_programs.py diffray ball    # by name (see --list)
    python tools/check_real_programs.py --list
    python tools/check_real_programs.py --json report.json --workdir /tmp/real
    python tools/check_real_programs.py --check-numerics   # traced runs record value summaries

For each program (a venv python, a module run with ``-m``, its arguments) this runs

1. ``PY -m MODULE ARGS``                                     (plain; timed)
2. ``PY -m warptrace -q --no-analyze -o W/NAME.wtrace [--check-numerics] -m MODULE ARGS``   (traced; timed)
3. ``PY -m warptrace analyze W/NAME.wtrace --format json``   (findings; timed)

each in its own process group with a timeout, with bytecode caching on (warptrace's
compiled first, as an installed package has it), from ``--workdir`` (the programs may
write files there; this repository's working tree is never the cwd). It then reports:
whether stdout is identical once timing text is normalized (see ``normalize``), both
exit codes, wall times and their ratio, the trace size on disk, the recorder's own
notes (``warptrace:`` lines, ``recorder_errors`` and ``complete`` from meta.json) and
every finding (code, severity, location).

Exit status: 0 when every program had identical stdout and exit code, produced a
readable complete trace and no ``error`` finding; 1 otherwise; 2 on usage errors.

This is a maintenance tool (evidence for the recorder and the rules on programs we did
not write), not a test: it needs the venvs below and takes minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The interpreters that run the programs (warptrace itself comes from this checkout through
# PYTHONPATH): one with warp-lang + warptrace's dependencies + pillow/usd-core, one with Newton.
WARP_PY = os.environ.get("WARPTRACE_WARP_PY", sys.executable)
NEWTON_PY = os.environ.get("WARPTRACE_NEWTON_PY", "/work/venvs/newton/bin/python")
REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Program:
    name: str
    python: str
    module: str
    args: tuple[str, ...]
    timeout_s: float = 600.0
    slow: bool = False  # only with --all or when named
    note: str = ""


WARP_OPTIM = "warp.examples.optim"
WARP_FEM = "warp.examples.fem"
NEWTON_DIFFSIM = "newton.examples.diffsim"

PROGRAMS: tuple[Program, ...] = (
    Program("diffray", WARP_PY, f"{WARP_OPTIM}.example_diffray",
            ("--device", "cpu", "--headless", "--height", "256", "--train-iters", "3"), 300),
    Program("fluid_checkpoint", WARP_PY, f"{WARP_OPTIM}.example_fluid_checkpoint",
            ("--device", "cpu", "--num-frames", "20", "--train-iters", "3", "--headless"), 600,
            note="hand-written gradient checkpointing (WT302/WT303/WT203 look-alike)"),
    Program("fluid_checkpoint_custom_backward", WARP_PY,
            f"{WARP_OPTIM}.example_fluid_checkpoint_custom_backward",
            ("--device", "cpu", "--num-frames", "20", "--train-iters", "3", "--headless"), 600,
            note="checkpointing + tape.record_func custom Jacobi adjoint"),
    Program("particle_repulsion", WARP_PY, f"{WARP_OPTIM}.example_particle_repulsion",
            ("--device", "cpu", "--num-frames", "20", "--headless"), 300),
    Program("navier_stokes_small", WARP_PY, f"{WARP_OPTIM}.example_navier_stokes_perturbation",
            ("--device", "cpu", "--spin-up-steps", "20", "--lead-steps", "10", "--train-iters", "2",
             "--headless"), 600, note="reduced spin-up/lead steps"),
    Program("navier_stokes", WARP_PY, f"{WARP_OPTIM}.example_navier_stokes_perturbation",
            ("--device", "cpu", "--train-iters", "1", "--headless"), 900, slow=True),
    Program("darcy_ls", WARP_PY, f"{WARP_FEM}.example_darcy_ls_optimization",
            ("--device", "cpu", "--resolution", "16", "--num-iters", "4", "--headless"), 600,
            note="implicit-function adjoint: solve outside the tape + tape.record_func"),
    Program("elastic_shape", WARP_PY, f"{WARP_FEM}.example_elastic_shape_optimization",
            ("--device", "cpu", "--resolution", "10", "--num-iters", "10", "--headless"), 600,
            note="implicit-function adjoint; gradient projected in place before the step"),
    Program("cloth", NEWTON_PY, f"{NEWTON_DIFFSIM}.example_diffsim_cloth",
            ("--device", "cpu", "--viewer", "null", "--test", "--num-frames", "480"), 900),
    Program("ball", NEWTON_PY, f"{NEWTON_DIFFSIM}.example_diffsim_ball",
            ("--device", "cpu", "--viewer", "null", "--test", "--num-frames", "60"), 600),
    Program("drone", NEWTON_PY, f"{NEWTON_DIFFSIM}.example_diffsim_drone",
            ("--device", "cpu", "--viewer", "null", "--test", "--num-frames", "60"), 900),
    Program("soft_body", NEWTON_PY, f"{NEWTON_DIFFSIM}.example_diffsim_soft_body",
            ("--device", "cpu", "--viewer", "null", "--test", "--num-frames", "60"), 900),
    Program("spring_cage", NEWTON_PY, f"{NEWTON_DIFFSIM}.example_diffsim_spring_cage",
            ("--device", "cpu", "--viewer", "null", "--test", "--num-frames", "60"), 600),
    Program("bear", NEWTON_PY, f"{NEWTON_DIFFSIM}.example_diffsim_bear",
            ("--device", "cpu", "--viewer", "null", "--test", "--num-frames", "60"), 1800, slow=True,
            note="~5 minutes plain"),
)  # fmt: skip


# ------------------------------------------------------------------ normalization
#
# Explicit and narrow: only these substrings are rewritten, the rest of every line is
# compared byte for byte (lines are kept, so a missing or extra line still shows).
#   "took 2.21 ms" / "took 1.3 s"         -> "took <T>"   (Warp module loads, ScopedTimer, examples' timers)
#   "(cached)" / "(compiled)" after a Warp module load -> "(<cache>)": depends on run order
#       only; the module *hash* on the same line is kept, so a kernel changed by the
#       recorder still shows as a difference.
#   ISO-8601 / "HH:MM:SS" timestamps       -> "<TIMESTAMP>"
TIMING_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\btook\s+\d+(?:\.\d+)?\s*(?:ms|s|sec|seconds|us|µs)\b"), "took <T>"),
    (re.compile(r"(\bload on device '[^']*' took <T>\s*)\((?:cached|compiled)\)"), r"\1(<cache>)"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?"), "<TIMESTAMP>"),
    (re.compile(r"\b\d{2}:\d{2}:\d{2}(?:\.\d+)?\b"), "<TIMESTAMP>"),
)


def normalize(text: str) -> tuple[list[str], int]:
    """Lines with timing text rewritten, and how many lines were touched."""
    out: list[str] = []
    touched = 0
    for line in text.splitlines():
        new = line
        for pattern, repl in TIMING_RULES:
            new = pattern.sub(repl, new)
        touched += new != line
        out.append(new)
    return out, touched


def compiled_modules(text: str) -> int:
    return len(re.findall(r"load on device '[^']*' took [\d.]+ ms\s*\(compiled\)", text))


# ------------------------------------------------------------------------ running


@dataclass
class Run:
    argv: list[str]
    rc: int | None = None  # None: timed out
    wall_s: float = 0.0
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False


def run_process(argv: list[str], cwd: Path, timeout_s: float, env: dict[str, str]) -> Run:
    """Run in a new session so a timeout kills the whole tree we started (and only it)."""
    run = Run(argv)
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL, start_new_session=True, text=True, errors="replace",
    )  # fmt: skip
    try:
        run.stdout, run.stderr = proc.communicate(timeout=timeout_s)
        run.rc = proc.returncode
    except subprocess.TimeoutExpired:
        run.timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            run.stdout, run.stderr = proc.communicate(timeout=15)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            run.stdout, run.stderr = proc.communicate()
    run.wall_s = time.perf_counter() - start
    return run


def dir_size(path: Path) -> int:
    if not path.is_dir():
        return 0
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@dataclass
class Result:
    program: Program
    plain: Run | None = None
    traced: Run | None = None
    analyze: Run | None = None
    stdout_identical: bool | None = None
    stdout_diff: list[str] = field(default_factory=list)
    stderr_identical: bool | None = None
    stderr_diff: list[str] = field(default_factory=list)
    normalized_lines: int = 0
    trace_bytes: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] | None = None
    analyze_error: str = ""
    warptrace_lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def findings(self) -> list[dict[str, Any]]:
        return list((self.report or {}).get("findings", []))


def _strip_warptrace_stderr(text: str) -> tuple[list[str], list[str]]:
    """Split the traced run's stderr into the program's lines and warptrace's own notes."""
    own, ours = [], []
    for line in text.splitlines():
        (ours if line.startswith("warptrace:") else own).append(line)
    return own, ours


def _diff(a: list[str], b: list[str], limit: int = 40) -> list[str]:
    lines = list(difflib.unified_diff(a, b, "plain", "traced", n=1, lineterm=""))
    return lines[:limit] + ([f"... ({len(lines) - limit} more diff lines)"] if len(lines) > limit else [])


def check(
    program: Program,
    workdir: Path,
    trace_dir: Path,
    timeout_scale: float,
    traced_only: bool,
    numerics: bool = False,
) -> Result:
    result = Result(program)
    env = dict(os.environ)
    env.setdefault("PYTHONHASHSEED", "0")
    # Python as users run it: bytecode cached (the programs' own packages have theirs from pip;
    # warptrace's is compiled in main() before timing). With PYTHONDONTWRITEBYTECODE set,
    # every traced run would recompile warptrace's modules (~60 ms), a cost no user pays.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # warptrace must be importable in the traced run whether or not it was pip-installed.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    timeout = program.timeout_s * timeout_scale
    trace = trace_dir / f"{program.name}.wtrace"
    if trace.exists():
        shutil.rmtree(trace)

    plain_argv = [program.python, "-m", program.module, *program.args]
    traced_argv = [program.python, "-m", "warptrace", "-q", "--no-analyze", "-o", str(trace),
                   *(["--check-numerics"] if numerics else []), "-m", program.module, *program.args]  # fmt: skip
    analyze_argv = [program.python, "-m", "warptrace", "analyze", str(trace), "--format", "json"]

    if not traced_only:
        _progress(f"[{program.name}] plain: {' '.join(plain_argv)}")
        result.plain = run_process(plain_argv, workdir, timeout, env)
        _progress(f"[{program.name}] plain rc={result.plain.rc} {result.plain.wall_s:.1f}s")
    _progress(f"[{program.name}] traced: {' '.join(traced_argv)}")
    result.traced = run_process(traced_argv, workdir, timeout * 3, env)
    _progress(f"[{program.name}] traced rc={result.traced.rc} {result.traced.wall_s:.1f}s")

    traced_err, result.warptrace_lines = _strip_warptrace_stderr(result.traced.stderr)
    if result.plain is not None:
        a, touched_a = normalize(result.plain.stdout)
        b, touched_b = normalize(result.traced.stdout)
        result.normalized_lines = max(touched_a, touched_b)
        result.stdout_identical = a == b
        result.stdout_diff = _diff(a, b)
        ea, _ = normalize(result.plain.stderr)
        eb, _ = normalize("\n".join(traced_err))
        result.stderr_identical = ea == eb
        result.stderr_diff = _diff(ea, eb)
        if not result.stdout_identical:
            result.problems.append("stdout differs")
        if result.plain.rc != result.traced.rc:
            result.problems.append(f"exit code differs: plain {result.plain.rc}, traced {result.traced.rc}")
        if compiled_modules(result.traced.stdout) > compiled_modules(result.plain.stdout):
            result.problems.append(
                f"traced run compiled {compiled_modules(result.traced.stdout)} module(s), plain "
                f"{compiled_modules(result.plain.stdout)} (kernel hash changed by the recorder?)"
            )
    if result.traced.timed_out:
        result.problems.append(f"traced run timed out after {timeout * 3:.0f}s")
    if result.plain is not None and result.plain.timed_out:
        result.problems.append(f"plain run timed out after {timeout:.0f}s")
    if "Traceback (most recent call last)" in result.traced.stderr and (
        result.plain is None or "Traceback (most recent call last)" not in result.plain.stderr
    ):
        result.problems.append("traceback in the traced run only")

    result.trace_bytes = dir_size(trace)
    meta_file = trace / "meta.json"
    if meta_file.is_file():
        try:
            result.meta = json.loads(meta_file.read_text())
        except (OSError, ValueError) as exc:
            result.problems.append(f"meta.json unreadable: {exc}")
        if not result.meta.get("complete", False):
            result.problems.append("trace not complete (meta.json complete=false)")
        if result.meta.get("recorder_errors"):
            result.problems.append(f"recorder_errors in meta.json: {_short(result.meta['recorder_errors'])}")
    else:
        result.problems.append("no trace written (meta.json missing)")
        return result

    _progress(f"[{program.name}] analyze")
    result.analyze = run_process(analyze_argv, workdir, max(300.0, timeout), env)
    _progress(f"[{program.name}] analyze rc={result.analyze.rc} {result.analyze.wall_s:.1f}s")
    try:
        result.report = json.loads(result.analyze.stdout)
    except ValueError:
        result.analyze_error = (result.analyze.stderr or result.analyze.stdout)[-3000:]
        result.problems.append(f"analyze failed (rc={result.analyze.rc})")
        return result
    errors = [f for f in result.findings if f.get("severity") == "error"]
    if errors:
        result.problems.append(f"{len(errors)} error finding(s): {sorted({f['code'] for f in errors})}")
    return result


def _short(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit] + "..."


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------ report


def _loc(location: dict[str, Any] | None) -> str:
    if not location:
        return "?"
    file = str(location.get("file") or "?")
    for marker in ("site-packages/", "/work/main/"):
        if marker in file:
            file = file.split(marker, 1)[1]
    return f"{file}:{location.get('line', '?')}"


def findings_summary(result: Result) -> str:
    if result.report is None:
        return "n/a"
    counts: dict[str, int] = {}
    for f in result.findings:
        key = f"{f['code']}/{f['severity']}"
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{k}×{v}" if v > 1 else k for k, v in sorted(counts.items())) or "none"


def print_report(results: list[Result]) -> None:
    header = ("program", "stdout", "rc plain/traced", "plain s", "traced s", "ratio", "analyze s",
              "trace MiB", "findings")  # fmt: skip
    rows = []
    for r in results:
        plain_s = r.plain.wall_s if r.plain else None
        traced_s = r.traced.wall_s if r.traced else None
        rows.append((
            r.program.name,
            {True: "identical", False: "DIFFERS", None: "-"}[r.stdout_identical],
            f"{_rc(r.plain)}/{_rc(r.traced)}",
            f"{plain_s:.1f}" if plain_s is not None else "-",
            f"{traced_s:.1f}" if traced_s is not None else "-",
            f"{traced_s / plain_s:.2f}" if plain_s and traced_s else "-",
            f"{r.analyze.wall_s:.1f}" if r.analyze else "-",
            f"{r.trace_bytes / 2**20:.1f}",
            findings_summary(r),
        ))  # fmt: skip
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for row in rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(row, widths)))

    for r in results:
        print(f"\n== {r.program.name}: {' '.join([r.program.module, *r.program.args])}")
        if r.program.note:
            print(f"   note: {r.program.note}")
        counts = (r.report or {}).get("counts") or r.meta.get("counts")
        if counts:
            print(f"   trace counts: {_short(counts, 400)}")
        if r.normalized_lines:
            print(f"   timing-normalized lines: {r.normalized_lines}")
        compiled = [compiled_modules(run.stdout) if run else 0 for run in (r.plain, r.traced)]
        if any(compiled):
            print(
                f"   Warp modules compiled (not cached): plain {compiled[0]}, traced {compiled[1]} "
                "(compile time is in that run's wall time)"
            )
        for line in r.warptrace_lines:
            print(f"   {line}")
        for problem in r.problems:
            print(f"   PROBLEM: {problem}")
        if r.stdout_identical is False:
            print("   stdout diff (normalized):")
            for line in r.stdout_diff:
                print(f"     {line}")
        if r.stderr_identical is False:
            print("   stderr diff (normalized, warptrace: lines removed; informational):")
            for line in r.stderr_diff:
                print(f"     {line}")
        if r.traced and (r.traced.timed_out or r.traced.rc not in (0, _rc(r.plain))):
            print("   traced stderr tail:")
            for line in r.traced.stderr.splitlines()[-40:]:
                print(f"     {line}")
        if r.analyze_error:
            print("   analyze output tail:")
            for line in r.analyze_error.splitlines()[-40:]:
                print(f"     {line}")
        for f in r.findings:
            print(
                f"   {f['code']} {f['severity']} x{f.get('count', 1)} at {_loc(f.get('location'))}: {f.get('message', '')}"
            )
            for rel in f.get("related", [])[:6]:
                print(f"        related {rel.get('role', '')}: {_loc(rel)}")
            if f.get("evidence"):
                print(f"        evidence: {_short(f['evidence'], 300)}")


def _rc(run: Run | None) -> Any:
    if run is None:
        return "-"
    return "timeout" if run.timed_out else run.rc


def to_json(results: list[Result]) -> list[dict[str, Any]]:
    out = []
    for r in results:
        out.append({
            "name": r.program.name,
            "python": r.program.python,
            "module": r.program.module,
            "args": list(r.program.args),
            "stdout_identical": r.stdout_identical,
            "stderr_identical": r.stderr_identical,
            "stdout_diff": r.stdout_diff,
            "rc_plain": _rc(r.plain),
            "rc_traced": _rc(r.traced),
            "plain_s": r.plain.wall_s if r.plain else None,
            "traced_s": r.traced.wall_s if r.traced else None,
            "analyze_s": r.analyze.wall_s if r.analyze else None,
            "trace_bytes": r.trace_bytes,
            "compiled_modules_plain": compiled_modules(r.plain.stdout) if r.plain else None,
            "compiled_modules_traced": compiled_modules(r.traced.stdout) if r.traced else None,
            "meta": r.meta,
            "warptrace_lines": r.warptrace_lines,
            "problems": r.problems,
            "findings": r.findings,
            "analyze_error": r.analyze_error,
            "traced_stderr_tail": r.traced.stderr[-5000:] if r.traced else "",
        })  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="programs to run (default: all not marked slow)")
    parser.add_argument("--all", action="store_true", help="include slow programs")
    parser.add_argument("--list", action="store_true", help="list the programs and exit")
    parser.add_argument("--workdir", default="/tmp/real", help="cwd of the runs and default trace folder")
    parser.add_argument("--trace-dir", default=None, help="where NAME.wtrace goes (default: WORKDIR)")
    parser.add_argument("--timeout-scale", type=float, default=1.0, help="multiply every timeout")
    parser.add_argument("--traced-only", action="store_true", help="skip the plain run (no comparison)")
    parser.add_argument("--json", default=None, help="also write the results as JSON to this file")
    parser.add_argument(
        "--check-numerics",
        action="store_true",
        help="record the traced run with --check-numerics (value summaries: the WT5xx rules)",
    )
    args = parser.parse_args(argv)

    by_name = {p.name: p for p in PROGRAMS}
    if args.list:
        for p in PROGRAMS:
            flag = " (slow)" if p.slow else ""
            print(f"{p.name}{flag}: {p.python} -m {p.module} {' '.join(p.args)}")
        return 0
    unknown = [n for n in args.names if n not in by_name]
    if unknown:
        parser.error(f"unknown program(s) {unknown}; known: {sorted(by_name)}")
    selected = [by_name[n] for n in args.names] or [p for p in PROGRAMS if args.all or not p.slow]

    workdir = Path(args.workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    trace_dir = Path(args.trace_dir).resolve() if args.trace_dir else workdir
    trace_dir.mkdir(parents=True, exist_ok=True)

    results = []
    compiled: set[str] = set()
    for program in selected:
        if not Path(program.python).exists():
            _progress(f"[{program.name}] skipped: {program.python} not found")
            continue
        if program.python not in compiled:  # what `pip install` does for an installed package
            compiled.add(program.python)
            subprocess.run([program.python, "-m", "compileall", "-q", str(REPO / "warptrace")], check=False)
        results.append(
            check(program, workdir, trace_dir, args.timeout_scale, args.traced_only, args.check_numerics)
        )
    print_report(results)
    if args.json:
        Path(args.json).write_text(json.dumps(to_json(results), indent=2, default=str) + "\n")
    return 1 if any(r.problems for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
