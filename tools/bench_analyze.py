"""Offline analysis benchmark (DESIGN.md §7): time and memory of ``analyze`` vs trace size.

    python tools/bench_analyze.py                       # 10k, 100k and 1M launches, a table
    python tools/bench_analyze.py --sizes 100k --keep /tmp/traces
    python tools/bench_analyze.py --sizes 1M --profile  # cProfile of load + analysis, top functions
    python tools/bench_analyze.py --accumulate 4        # gradient accumulation: 4 backward calls per step
    python tools/bench_analyze.py --rule-cases          # the test suite's scale cases, timed
    python tools/bench_analyze.py --trace drone.wtrace --repeat 3   # an existing trace, by phase
    python tools/bench_analyze.py --scale --keep /tmp/scale  # 1M, 4M, 20M: peak memory and CPU, whole vs windowed

``--rule-cases`` times the scale cases of the tests (which assert only their counts: no test
asserts a wall time): the memory rule on ``spring_ping_pong`` (tests/test_rules_memory.py,
100k launches; load + check) and the accumulation rule on ``training_loop``
(tests/test_rules_accumulation.py, 3000 iterations; check), each also at a tenth of the
size for the scaling exponent. Exit status 1 when one exceeds its bound (memory 10 s,
accumulation 20 s of CPU time, the bounds the tests used to assert).

Traces come from ``tools/synth_trace.py``: a differentiable-simulation training loop
(one tape per iteration, ``3 * substeps + 1`` recorded launches, loss, backward with
adjoints, optimizer launch, ``tape.zero()`` memsets, one reused scratch buffer so that
WT101 fires); ``--part-rows 16384`` gives parts as small as the recorder's. Each size is
analyzed in its own process, so the peak RSS reported is that process's ``ru_maxrss``
(imports included). Reported per size: launches, events, access rows, bytes on disk (and
per access row), generation seconds, load seconds (``read_trace``), analyze seconds
(``analyze_trace``: model, then every rule in ``ALL_RULES``), peak RSS, and findings
(root causes and occurrences). Times are wall and CPU (user + system) seconds of the
analysis process; the scaling exponents between consecutive sizes
(``log(t2/t1) / log(n2/n1)``: 1.0 is linear) and the §7 targets (1M launches under 30 s
for load + analyze, under 4 GiB) use CPU seconds, which stay meaningful on a shared,
busy machine (the analysis is single-threaded). Exit status 1 when a target is missed.

The breakdown printed per size times the graph-capture expansion (``replay``: every
``capture_launch`` replaced by a copy of the captured events), ``Model()``, the ``Dataflow``
build (lazy, on the first rule that asks for it; not counted in that rule) and each rule,
inside the same ``analyze_trace`` call, by wrapping them.

``--trace PATH`` (repeatable) analyzes existing traces instead (a recorded real program,
e.g. Newton's diffsim drone with its 1200 graph replays), each ``--repeat`` times in a
fresh process, and prints per run the load and analysis CPU seconds, peak RSS and the
phases above, then the range over the runs; no table and no targets. A rule that raises is reported and skipped.
``--scale`` (issue 39: analysis memory bounded by the largest window) analyzes each size
(``--sizes``, default 1M,4M,20M) twice, each in its own process: whole (``analyze_trace``;
skipped above ``--whole-max`` launches, default 5M, where it would not fit in memory) and
windowed (``warptrace.analysis.chunks.analyze_windowed``, ``--window-events`` events per
window), and prints peak RSS and CPU seconds against launches, whether the two found the same
(findings and counts, compared as JSON), and the time exponents. Exit status 1 when they
differ or the windowed peak grows with the trace (more than 1.25x from the smallest size to
the largest). The traces are deleted after each size unless ``--keep``.

``--all-rule-modules`` also runs rule modules in ``warptrace/analysis/rules/`` that are
not registered in ``ALL_RULES`` yet.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import math
import os
import pkgutil
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

TARGET_SECONDS = 30.0
TARGET_BYTES = 4 << 30
TARGET_ROW_BYTES = 64


def _label(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.3g}M"
    if n >= 1_000:
        return f"{n / 1_000:.3g}k"
    return str(n)


# ----------------------------------------------------------------------------- child
def _windowed_child(path: str, window_events: int) -> None:
    """The windowed analysis of ``path``: CPU seconds, peak RSS, the findings as JSON."""
    import hashlib
    import resource

    from warptrace.analysis.chunks import analyze_windowed, plan_windows
    from warptrace.analysis.pages import reuse_freed_memory

    reuse_freed_memory()
    rss_imports = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start, cpu = time.perf_counter(), time.process_time()
    plan = plan_windows(path, window_events)
    plan_cpu = time.process_time() - cpu
    report = analyze_windowed(path, window_events, plan=plan)
    result = {
        "load_s": 0.0,
        "analyze_s": time.perf_counter() - start,
        "load_cpu": plan_cpu,
        "analyze_cpu": time.process_time() - cpu - plan_cpu,
        "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "rss_imports_kib": rss_imports,
        "findings": len(report.findings),
        "occurrences": sum(f.count for f in report.findings),
        "codes": sorted({f"{f.code}x{f.count}" for f in report.findings}),
        "windows": len(plan.windows) if plan is not None else 1,
        "digest": _digest(report, hashlib),
        "counts": report.counts,
    }
    print("RESULT " + json.dumps(result))


def _digest(report: Any, hashlib: Any) -> str:
    """A digest of what a report says (findings as JSON, counts, families): equal <=> same findings."""
    text = json.dumps(
        {
            "findings": [f.to_dict() for f in report.findings],
            "counts": report.counts,
            "families": report.families_checked,
        },
        sort_keys=True,
    )
    return str(hashlib.sha256(text.encode()).hexdigest()[:16])


def _child(path: str, all_rule_modules: bool, profile: int) -> None:
    import hashlib
    import resource

    from warptrace.analysis import dataflow as dataflow_module
    from warptrace.analysis import report as report_module
    from warptrace.analysis import rules as rules_package
    from warptrace.analysis.pages import reuse_freed_memory
    from warptrace.trace.reader import read_trace

    reuse_freed_memory()  # as the CLI's analyze process does
    timings: dict[str, float] = {}
    peaks: dict[str, int] = {}  # peak RSS (KiB) of the process when each timed step ended
    rules = list(report_module.ALL_RULES)
    if all_rule_modules:
        for module_info in pkgutil.iter_modules(rules_package.__path__):
            module = importlib.import_module(f"{rules_package.__name__}.{module_info.name}")
            rule = getattr(module, "RULE", None)
            if rule is not None and rule not in rules:
                rules.append(rule)

    nested: list[float] = []  # time spent in timed callees of the running timed call (exclusive timings)

    def timed(name: str, func: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            nested.append(0.0)
            try:
                return func(*args, **kwargs)
            finally:
                elapsed = time.process_time() - start
                inner = nested.pop()
                timings[name] = timings.get(name, 0.0) + elapsed - inner
                peaks[name] = _hwm_kib()
                if nested:
                    nested[-1] += elapsed

        return wrapper

    errors: dict[str, str] = {}

    def guarded(name: str, rule: Any) -> Any:
        # rules are still being written: a crashing rule is reported, not fatal to the benchmark
        def wrapper(model: Any) -> Any:
            try:
                return rule(model)
            except Exception as exc:
                errors[name] = f"{type(exc).__name__}: {exc}"
                return []

        return timed(name, wrapper)

    report_module.Model = timed("model", report_module.Model)
    report_module.expand_replays = timed("replay", report_module.expand_replays)
    report_module.ALL_RULES = tuple(
        dataclasses.replace(r, check=guarded(f"rule {r.check.__module__.rsplit('.', 1)[-1]}", r.check))
        for r in rules
    )
    dataflow_cls = getattr(dataflow_module, "Dataflow", None)
    if dataflow_cls is not None:
        dataflow_cls.__init__ = timed("dataflow", dataflow_cls.__init__)

    rss_imports = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    start, cpu = time.perf_counter(), time.process_time()
    trace = read_trace(path)
    load_s, load_cpu = time.perf_counter() - start, time.process_time() - cpu
    rss_loaded = _hwm_kib()
    start, cpu = time.perf_counter(), time.process_time()
    report = report_module.analyze_trace(trace)
    analyze_s, analyze_cpu = time.perf_counter() - start, time.process_time() - cpu
    if profiler is not None:
        import io
        import pstats

        profiler.disable()
        for order in ("tottime", "cumulative"):
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(profile)
            text = out.getvalue()
            print(text[text.find("   ncalls") :] if "   ncalls" in text else text, file=sys.stderr)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = {
        "load_s": load_s,
        "analyze_s": analyze_s,
        "load_cpu": load_cpu,
        "analyze_cpu": analyze_cpu,
        "rss_kib": rss,
        "rss_imports_kib": rss_imports,
        "findings": len(report.findings),
        "occurrences": sum(f.count for f in report.findings),
        "codes": sorted({f"{f.code}x{f.count}" for f in report.findings}),
        "rules": len(report_module.ALL_RULES),
        "timings": timings,
        "peaks": peaks,
        "rss_loaded_kib": rss_loaded,
        "errors": errors,
        "counts": report.counts,
        "digest": _digest(report, hashlib),
    }
    print("RESULT " + json.dumps(result))


def _hwm_kib() -> int:
    """Peak RSS so far (VmHWM, KiB); 0 where /proc is missing."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


# ----------------------------------------------------------------------------- parent
def _run_child(path: Path, all_rule_modules: bool, profile: int, window_events: int = 0) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(path)]
    if window_events:
        cmd += ["--windowed-child", str(window_events)]
    if all_rule_modules:
        cmd.append("--all-rule-modules")
    if profile:
        cmd += ["--profile-lines", str(profile)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.stderr:
        sys.stderr.write(proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"analysis child failed with status {proc.returncode} on {path}")
    line = next(ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def _exponent(a: float, b: float, na: int, nb: int) -> float:
    if a <= 0 or b <= 0 or na == nb:
        return float("nan")
    return math.log(b / a) / math.log(nb / na)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10k,100k,1M", help="launch counts, comma separated (10k,100k,1M)")
    parser.add_argument("--keep", metavar="DIR", help="write the traces here and keep them")
    parser.add_argument("--substeps", type=int, default=16, help="simulation substeps per iteration (tape)")
    parser.add_argument("--part-rows", type=int, default=100_000, help="access rows per Parquet part")
    parser.add_argument("--accumulate", type=int, default=1,
                        help="gradient accumulation: backward calls per optimizer step and tape.zero()")  # fmt: skip
    parser.add_argument("--all-rule-modules", action="store_true", help="also run unregistered rule modules")
    parser.add_argument("--profile", action="store_true", help="cProfile each child; print the top functions")
    parser.add_argument("--profile-lines", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="append", default=[], metavar="PATH",
                        help="analyze this existing trace by phase instead (repeatable)")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=1, help="runs per --trace (default 1)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--windowed-child", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--scale", action="store_true",
                        help="peak memory and CPU against launches, whole vs windowed (default sizes 1M,4M,20M)")  # fmt: skip
    parser.add_argument("--window-events", type=int, default=1_000_000, help="events per window (--scale)")
    parser.add_argument(
        "--whole-max", default="5M", help="largest size analyzed whole by --scale (default 5M)"
    )
    parser.add_argument(
        "--rule-cases", action="store_true", help="time the test suite's scale cases and exit"
    )
    args = parser.parse_args(argv)

    if args.rule_cases:
        return _rule_cases()

    if args.child:
        if args.windowed_child:
            _windowed_child(args.child, args.windowed_child)
        else:
            _child(args.child, args.all_rule_modules, args.profile_lines)
        return 0

    if args.scale:
        sizes_text = args.sizes if "--sizes" in (argv if argv is not None else sys.argv) else "1M,4M,20M"
        return _scale(args, sizes_text)

    if args.trace:
        return _existing_traces(args.trace, args.repeat, args.all_rule_modules, 30 if args.profile else 0)

    from synth_trace import generate, parse_size

    sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="wt_bench_"))
    root.mkdir(parents=True, exist_ok=True)
    profile = 30 if args.profile else 0
    print(
        f"warptrace analysis benchmark: {os.cpu_count()} CPUs, python {sys.version.split()[0]}, traces in {root}"
    )
    rows = []
    try:
        for n in sizes:
            path = root / f"synth-{_label(n)}-s{args.substeps}-a{args.accumulate}.wtrace"
            start = time.perf_counter()
            info = generate(
                path, n, substeps=args.substeps, part_rows=args.part_rows, accumulate=args.accumulate
            )
            gen_s = time.perf_counter() - start
            print(f"  generated {path.name}: {info.launches} launches, {info.events} events, "
                  f"{info.accesses} access rows in {gen_s:.1f} s", flush=True)  # fmt: skip
            result = _run_child(path, args.all_rule_modules, profile)
            rows.append((info, gen_s, result))
            peaks = result["peaks"]
            breakdown = ", ".join(
                f"{k} {v:.2f} s [{peaks.get(k, 0) / 1024:.0f}]" for k, v in result["timings"].items()
            )
            print(f"  analyzed, CPU s [peak RSS MiB so far]: load {result['load_cpu']:.2f} s "
                  f"[{result['rss_loaded_kib'] / 1024:.0f}], {breakdown}", flush=True)  # fmt: skip
            print(f"  findings: {' '.join(result['codes']) or 'none'}", flush=True)
            for name, error in result["errors"].items():
                print(
                    f"  !! {name} raised {error} (its time is counted, its findings are missing)", flush=True
                )
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    print()
    _table(rows)
    failures = _checks(rows)
    load = os.getloadavg()[0]
    if load > (os.cpu_count() or 1):
        print(f"note: load average {load:.1f} on {os.cpu_count()} CPUs: wall times are inflated; "
              "targets and scaling use CPU seconds")  # fmt: skip
    print()
    if failures:
        print("TARGETS MISSED:\n  " + "\n  ".join(failures))
        return 1
    print("targets met (DESIGN.md §7: linear; 1M launches < 30 s and < 4 GiB; < 64 B per access row)")
    return 0


def _scale(args: argparse.Namespace, sizes_text: str) -> int:
    """Peak memory and CPU time against launches, the whole-trace and the windowed analysis."""
    from synth_trace import generate, parse_size

    sizes = [parse_size(s) for s in sizes_text.split(",") if s.strip()]
    whole_max = parse_size(args.whole_max)
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="wt_scale_"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"warptrace analysis at scale: {os.cpu_count()} CPUs, python {sys.version.split()[0]}, "
          f"{args.window_events} events per window, traces in {root}", flush=True)  # fmt: skip
    rows: list[tuple[Any, dict[str, Any] | None, dict[str, Any]]] = []
    for n in sizes:
        path = root / f"synth-{_label(n)}-s{args.substeps}-a{args.accumulate}.wtrace"
        start = time.perf_counter()
        info = generate(path, n, substeps=args.substeps, part_rows=args.part_rows, accumulate=args.accumulate)
        print(f"  generated {path.name}: {info.launches} launches, {info.events} events, "
              f"{info.accesses} access rows in {time.perf_counter() - start:.1f} s", flush=True)  # fmt: skip
        try:
            whole = _run_child(path, False, 0) if n <= whole_max else None
            windowed = _run_child(path, False, 0, args.window_events)
        finally:
            if not args.keep:
                shutil.rmtree(path, ignore_errors=True)
        for name, r in (("whole", whole), ("windowed", windowed)):
            if r is not None:
                print(f"  {name}: {r['load_cpu'] + r['analyze_cpu']:.1f} CPU s, peak RSS "
                      f"{r['rss_kib'] / 2**20:.2f} GiB, findings {' '.join(r['codes']) or 'none'}", flush=True)  # fmt: skip
        rows.append((info, whole, windowed))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return _scale_table(rows)


def _scale_table(rows: list[tuple[Any, dict[str, Any] | None, dict[str, Any]]]) -> int:
    print()
    print("CPU s: load + analyze (user + system) of the analysis process; peak: its peak RSS")
    head = (f"{'launches':>10} {'access rows':>12} {'whole CPU s':>11} {'whole peak':>10} "
            f"{'windows':>7} {'windowed CPU s':>14} {'windowed peak':>13} {'same findings':>13}")  # fmt: skip
    print(head)
    print("-" * len(head))
    failures = []
    for info, whole, win in rows:
        cpu_w = win["load_cpu"] + win["analyze_cpu"]
        same = "-" if whole is None else ("yes" if whole["digest"] == win["digest"] else "NO")
        if same == "NO":
            failures.append(
                f"{_label(info.launches)} launches: the windowed findings differ from the whole analysis"
            )
        whole_cpu = f"{whole['load_cpu'] + whole['analyze_cpu']:.1f}" if whole else "-"
        whole_peak = f"{whole['rss_kib'] / 2**20:.2f} GiB" if whole else "-"
        print(f"{info.launches:>10} {info.accesses:>12} {whole_cpu:>11} {whole_peak:>10} {win['windows']:>7} "
              f"{cpu_w:>14.1f} {win['rss_kib'] / 2**20:>9.2f} GiB {same:>13}")  # fmt: skip
    if len(rows) > 1:
        print("\ntime exponents between consecutive sizes (CPU s vs access rows, 1.0 = linear):")
        for (ia, wa, va), (ib, wb, vb) in zip(rows, rows[1:]):
            parts = []
            for name, ra, rb in (("whole", wa, wb), ("windowed", va, vb)):
                if ra is not None and rb is not None:
                    exp = _exponent(ra["load_cpu"] + ra["analyze_cpu"], rb["load_cpu"] + rb["analyze_cpu"],
                                    ia.accesses, ib.accesses)  # fmt: skip
                    parts.append(f"{name} {exp:.2f}")
            print(f"  {_label(ia.launches)} -> {_label(ib.launches)}: {', '.join(parts)}")
        first, last = rows[0][2]["rss_kib"], rows[-1][2]["rss_kib"]
        if last > 1.25 * first:
            failures.append(
                f"windowed peak grows with the trace: {first / 2**20:.2f} -> {last / 2**20:.2f} GiB"
            )
    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures))
        return 1
    return 0


def _existing_traces(paths: list[str], repeat: int, all_rule_modules: bool, profile: int) -> int:
    """Phase timings of existing traces, ``repeat`` fresh processes each, and the range of the totals."""
    load = os.getloadavg()[0]
    print(f"warptrace analysis of existing traces: {os.cpu_count()} CPUs, load average {load:.1f}, "
          f"python {sys.version.split()[0]}; CPU seconds (user + system) of the analysis process")  # fmt: skip
    for path in paths:
        totals = []
        for run in range(max(1, repeat)):
            r = _run_child(Path(path), all_rule_modules, profile)
            total = r["load_cpu"] + r["analyze_cpu"]
            totals.append(total)
            phases = ", ".join(
                f"{name} {seconds:.2f}"
                for name, seconds in sorted(r["timings"].items(), key=lambda item: -item[1])
                if seconds >= 0.05
            )
            counts = r["counts"]
            if run == 0:
                print(f"{path}: {counts.get('events', 0)} events, {counts.get('launches', 0)} launches "
                      f"after replaying captures; findings {' '.join(r['codes']) or 'none'}")  # fmt: skip
            print(f"  run {run + 1}: load {r['load_cpu']:.2f} + analyze {r['analyze_cpu']:.2f} = {total:.2f} CPU s, "
                  f"peak RSS {r['rss_kib'] / 1024:.0f} MiB; {phases}")  # fmt: skip
            for name, error in r["errors"].items():
                print(f"  !! {name} raised {error}")
        print(f"  load + analyze: {min(totals):.2f}-{max(totals):.2f} CPU s over {len(totals)} run(s)")
    load_after = os.getloadavg()[0]
    if max(load, load_after) > (os.cpu_count() or 1):
        print(
            f"note: load average {load:.1f} -> {load_after:.1f} on {os.cpu_count()} CPUs: times are inflated"
        )
    return 0


def _rule_cases() -> int:
    """Time the tests' scale cases (built with tests/tracebuilder.py): CPU seconds, exponent, bound."""
    from tests.test_rules_accumulation import training_loop
    from tests.test_rules_memory import spring_ping_pong
    from tests.tracebuilder import TraceBuilder
    from warptrace.analysis.model import Model
    from warptrace.analysis.rules import ALL_RULES
    from warptrace.trace.reader import read_trace

    def family(prefix: str) -> list[Any]:
        return [rule for rule in ALL_RULES if rule.codes[0].startswith(prefix)]

    def memory_case(path: Path) -> float:
        start = time.process_time()
        model = Model(read_trace(path))
        for rule in family("WT1"):
            rule.check(model)
        return time.process_time() - start

    def accumulation_case(path: Path) -> float:
        model = Model(read_trace(path))
        start = time.process_time()
        for rule in family("WT2"):
            rule.check(model)
        return time.process_time() - start

    cases = [
        ("memory: spring_ping_pong, load + check", spring_ping_pong, 50_000, 2, memory_case, 10.0),
        ("accumulation: training_loop, check", training_loop, 3000, 3, accumulation_case, 20.0),
    ]
    failures = []
    with tempfile.TemporaryDirectory(prefix="wt_rules_") as tmp:
        for name, build, count, launches_per, measure, bound in cases:
            seconds = []
            for n in (count // 10, count):
                tb = TraceBuilder()
                build(tb, n)
                seconds.append(measure(tb.write(Path(tmp) / f"{build.__name__}-{n}.wtrace")))
            exponent = _exponent(seconds[0], seconds[1], count // 10, count)
            print(f"{name}: {count * launches_per} launches {seconds[1]:.2f} CPU s "
                  f"({count // 10 * launches_per}: {seconds[0]:.2f} s; exponent {exponent:.2f}); bound {bound:.0f} s")  # fmt: skip
            if seconds[1] >= bound:
                failures.append(f"{name}: {seconds[1]:.1f} s >= {bound:.0f} s")
    if failures:
        print("BOUNDS EXCEEDED:\n  " + "\n  ".join(failures))
        return 1
    return 0


def _table(rows: list[tuple[Any, float, dict[str, Any]]]) -> None:
    head = (f"{'launches':>9} {'events':>9} {'acc rows':>10} {'disk MiB':>8} {'B/acc':>5} {'gen s':>5} "
            f"{'load s':>11} {'analyze s':>11} {'total s':>11} {'RSS MiB':>7} {'findings':>13}")  # fmt: skip
    print("times are wall/CPU seconds of the analysis process; findings: root causes (occurrences)")
    print(head)
    print("-" * len(head))
    for info, gen_s, r in rows:
        load, analyze = (
            f"{r['load_s']:.2f}/{r['load_cpu']:.2f}",
            f"{r['analyze_s']:.2f}/{r['analyze_cpu']:.2f}",
        )
        total = f"{r['load_s'] + r['analyze_s']:.2f}/{r['load_cpu'] + r['analyze_cpu']:.2f}"
        findings = f"{r['findings']} ({r['occurrences']})"
        print(
            f"{info.launches:>9} {info.events:>9} {info.accesses:>10} {info.bytes_on_disk / 2**20:>8.1f} "
            f"{info.bytes_on_disk / info.accesses:>5.1f} {gen_s:>5.1f} {load:>11} {analyze:>11} {total:>11} "
            f"{r['rss_kib'] / 1024:>7.0f} {findings:>13}"
        )
    if rows:
        r = rows[0][2]
        print(f"(rules run: {r['rules']}; RSS after imports {r['rss_imports_kib'] / 1024:.0f} MiB)")


def _checks(rows: list[tuple[Any, float, dict[str, Any]]]) -> list[str]:
    failures = []
    if len(rows) > 1:
        print(
            "\nscaling exponent between consecutive sizes, CPU seconds and RSS vs access rows (1.0 = linear):"
        )
        for (ia, _, ra), (ib, _, rb) in zip(rows, rows[1:]):
            na, nb = ia.accesses, ib.accesses
            exps = {
                "load": _exponent(ra["load_cpu"], rb["load_cpu"], na, nb),
                "analyze": _exponent(ra["analyze_cpu"], rb["analyze_cpu"], na, nb),
                "RSS above imports": _exponent(
                    ra["rss_kib"] - ra["rss_imports_kib"], rb["rss_kib"] - rb["rss_imports_kib"], na, nb
                ),
            }
            parts = ", ".join(f"{k} {v:.2f}" for k, v in exps.items())
            ratio = rb["analyze_cpu"] / ra["analyze_cpu"] if ra["analyze_cpu"] else float("nan")
            print(f"  {_label(ia.launches)} -> {_label(ib.launches)} launches (x{nb / na:.1f} rows): {parts}; "
                  f"analyze CPU time x{ratio:.1f}")  # fmt: skip
        ia, _, ra = rows[-2]
        ib, _, rb = rows[-1]
        exp = _exponent(ra["analyze_cpu"] + ra["load_cpu"], rb["analyze_cpu"] + rb["load_cpu"], ia.accesses,
                        ib.accesses)  # fmt: skip
        if ib.launches >= 100_000 and exp > 1.15:
            failures.append(
                f"load+analyze grows super-linearly (exponent {exp:.2f} between the two largest sizes)"
            )
    for info, _, r in rows:
        name = f"{_label(info.launches)} launches"
        if info.launches >= 1_000_000:
            total = r["load_cpu"] + r["analyze_cpu"]
            if total > TARGET_SECONDS * info.launches / 1_000_000:
                failures.append(
                    f"{name}: {total:.1f} CPU s (target < {TARGET_SECONDS:.0f} s per 1M launches)"
                )
            if r["rss_kib"] * 1024 > TARGET_BYTES:
                failures.append(f"{name}: peak RSS {r['rss_kib'] / 2**20:.2f} GiB (target < 4 GiB)")
        if info.bytes_on_disk / info.accesses > TARGET_ROW_BYTES:
            failures.append(
                f"{name}: {info.bytes_on_disk / info.accesses:.0f} bytes per access row (target < 64)"
            )
    return failures


if __name__ == "__main__":
    sys.exit(main())
