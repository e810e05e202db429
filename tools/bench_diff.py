"""``warptrace diff`` benchmark: two large traces compared within the analysis budget (DESIGN.md §7).

    python tools/bench_diff.py                     # two 1M-launch traces
    python tools/bench_diff.py --launches 100k --keep /tmp/traces

BEFORE and AFTER are synthetic training runs from ``tools/synth_trace.py`` (a
differentiable simulation: one tape per iteration, ``3 * substeps + 1`` recorded
launches, backward, optimizer, ``tape.zero()``), AFTER with gradient accumulation
(``--accumulate 4``: the optimizer and ``tape.zero()`` run every 4th iteration), so
the diff has real work: the loop bodies differ, steps move. The diff runs in its own
process: read both traces, ``diff_traces`` (analysis of each run, reduced to a profile
one after the other, then the comparison) and the text report. Reported: wall and CPU
seconds per phase and in total, peak RSS (``ru_maxrss``, imports included), and the
report's first lines; then, for scale, load + analyze of BEFORE alone in another
process at the same moment (the diff analyzes both runs, so it costs about two of
these plus the comparison). Target (checked from 1M launches on): the analysis budget, 1M
launches in under 30 CPU s and 4 GiB; exit status 1 when missed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

TARGET_SECONDS = 30.0
TARGET_BYTES = 4 << 30


def _child(before: str, after: str) -> None:
    import resource

    from warptrace.analysis.diff import diff_profiles
    from warptrace.analysis.diff.profile import build_profile
    from warptrace.report.diff import render
    from warptrace.trace.reader import read_trace

    phases: dict[str, tuple[float, float]] = {}

    def timed(name: str, func, *args):  # type: ignore[no-untyped-def]
        start, cpu = time.perf_counter(), time.process_time()
        result = func(*args)
        phases[name] = (time.perf_counter() - start, time.process_time() - cpu)
        return result

    profile_a = timed("before: load + analyze + profile", lambda: build_profile(read_trace(before)))
    profile_b = timed("after: load + analyze + profile", lambda: build_profile(read_trace(after)))
    diff = timed("compare", diff_profiles, profile_a, profile_b)
    text = timed("render", render, diff)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        json.dumps(
            {
                "phases": phases,
                "cpu": usage.ru_utime + usage.ru_stime,
                "rss_kib": usage.ru_maxrss,
                "report": text.splitlines()[:24],
                "changes": len(diff.changes),
            }
        )
    )


def _child_analyze(path: str) -> None:
    import resource

    from warptrace.analysis.report import analyze_trace
    from warptrace.trace.reader import read_trace

    start, cpu = time.perf_counter(), time.process_time()
    analyze_trace(read_trace(path))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        json.dumps(
            {
                "wall": time.perf_counter() - start,
                "cpu": time.process_time() - cpu,
                "rss_kib": usage.ru_maxrss,
            }
        )
    )


def _run_child(*args: str) -> dict | None:
    result = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        print(result.stderr, file=sys.stderr)
        return None
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", default="1M", help="launches per trace (default 1M)")
    parser.add_argument("--substeps", type=int, default=16)
    parser.add_argument(
        "--keep", metavar="DIR", help="write the traces here and keep them (reused when present)"
    )
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--child-analyze", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    if args.child_analyze:
        _child_analyze(args.child_analyze)
        return 0

    from synth_trace import generate, parse_size

    launches = parse_size(args.launches)
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="wt_bench_diff_"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        paths = {}
        for name, accumulate in (("before", 1), ("after", 4)):
            path = root / f"{name}_{launches}.wtrace"
            if not path.exists():
                start = time.perf_counter()
                info = generate(path, launches, substeps=args.substeps, accumulate=accumulate)
                print(
                    f"{name}: {info.launches:,} launches, {info.events:,} events, {info.accesses:,} access rows "
                    f"(generated in {time.perf_counter() - start:.1f} s)",
                    flush=True,
                )
            paths[name] = path
        data = _run_child("--child", str(paths["before"]), str(paths["after"]))
        # the same machine, the same moment: load + analyze of BEFORE alone, for scale
        alone = _run_child("--child-analyze", str(paths["before"]))
        if data is None or alone is None:
            return 2
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    for name, (wall, cpu) in data["phases"].items():
        print(f"  {name:36s} {wall:7.2f} s wall {cpu:7.2f} s CPU")
    print(
        f"  {'total (process)':36s} {'':16s}{data['cpu']:7.2f} s CPU, peak RSS {data['rss_kib'] / 2**20:.2f} GiB"
    )
    print(
        f"  {'analyze BEFORE alone (separate process)':36s} {alone['wall']:7.2f} s wall {alone['cpu']:7.2f} s CPU, "
        f"peak RSS {alone['rss_kib'] / 2**20:.2f} GiB"
    )
    print(f"  {data['changes']} structural changes; report:")
    for line in data["report"]:
        print("    " + line[:150])
    failures = []
    if launches >= 1_000_000 and data["cpu"] > TARGET_SECONDS * launches / 1_000_000:
        failures.append(f"{data['cpu']:.1f} CPU s (target < {TARGET_SECONDS * launches / 1_000_000:.0f} s)")
    if data["rss_kib"] * 1024 > TARGET_BYTES:
        failures.append(f"peak RSS {data['rss_kib'] / 2**20:.2f} GiB (target < 4 GiB)")
    for failure in failures:
        print("MISSED: " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
