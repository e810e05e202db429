"""Recording schedules on a long run: trace size and overhead against the steps recorded.

    python tools/bench_record_schedule.py                      # 100000 iterations
    python tools/bench_record_schedule.py --iters 20000 --runs 2 --no-full

A toy training loop (a tape per iteration: two taped launches, backward, an SGD launch,
``tape.zero()``, the loss zeroed: one step per iteration, 12 events of which 5 launches) runs
``--iters`` times as a script of its own: plainly, under ``python -m warptrace -q --no-analyze``
with ``--record-steps`` schedules of 10, 100 and 1000 steps, with ``--record-last 10``, and
(unless ``--no-full``) recorded whole. The script times its own loop (after one warm-up
iteration; startup, imports and the final ``stop()`` are not in the figure): wall time and the
CPU time of the program's thread ("main CPU", steadier than wall time on a loaded machine).
Reported per mode: the main-thread CPU time over the plain run's (in all, per iteration, and
divided by the steps recorded), the trace's size on disk, its event rows and the steps it holds. Alternated ``--runs`` times; the medians are printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SCRIPT = r"""
import sys, time
import warp as wp

wp.config.quiet = True
wp.init()
iters = int(sys.argv[1])


@wp.kernel
def fwd(x: wp.array(dtype=float), w: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.tanh(x[i] * w[i])


@wp.kernel
def loss_k(y: wp.array(dtype=float), l: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(l, 0, y[i] * y[i])


@wp.kernel
def sgd(w: wp.array(dtype=float), g: wp.array(dtype=float)):
    i = wp.tid()
    w[i] = w[i] - 0.001 * g[i]


n = 64
x = wp.full(n, 0.5, dtype=float)
w = wp.ones(n, dtype=float, requires_grad=True)
y = wp.zeros(n, dtype=float, requires_grad=True)
l = wp.zeros(1, dtype=float, requires_grad=True)


def step():
    tape = wp.Tape()
    with tape:
        wp.launch(fwd, dim=n, inputs=[x, w], outputs=[y])
        wp.launch(loss_k, dim=n, inputs=[y], outputs=[l])
    tape.backward(l)
    wp.launch(sgd, dim=n, inputs=[w, w.grad])
    tape.zero()
    l.zero_()


step()  # warm-up: kernels loaded
t0, c0 = time.perf_counter(), time.thread_time()
for _ in range(iters - 1):
    step()
print("LOOP", time.perf_counter() - t0, time.thread_time() - c0)
"""


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def run_mode(script: Path, iters: int, options: list[str] | None, out: Path) -> dict[str, float]:
    if options is None:
        command = [sys.executable, str(script), str(iters)]
    else:
        command = [sys.executable, "-m", "warptrace", "-q", "--no-analyze", "-o", str(out), *options,
                   str(script), str(iters)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    loop = next(line.split() for line in done.stdout.splitlines() if line.startswith("LOOP"))
    result = {"wall": float(loop[1]), "cpu": float(loop[2])}
    if options is not None:
        meta = json.loads((out / "meta.json").read_text())
        result["bytes"] = _size(out)
        result["events"] = meta.get("counts", {}).get("events", 0)
        recording = meta.get("recording") or {}
        result["recorded"] = sum(
            w["last_step"] - w["first_step"] + 1 for w in recording.get("windows", [])
        ) or (iters if not recording else 0)
    return result


def in_process(script: Path, block: int, repeats: int, folder: Path) -> None:
    """Main-thread CPU per iteration, in one process: the loop plain, under a session paused by a
    schedule (no step recorded), and recorded; blocks alternated, the minimum of ``repeats``
    kept (on a loaded machine the minimum is the figure that noise does not inflate)."""
    import importlib.util
    import time

    import warptrace

    sys.argv = [str(script), "2"]
    spec = importlib.util.spec_from_file_location("bench_schedule_loop", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # (runs its 2-iteration loop: kernels loaded)
    step = module.step
    best: dict[str, float] = {}
    for repeat in range(repeats):
        for name, schedule in (("plain", None), ("paused", "1000000000"), ("recorded", "0-")):
            if schedule is not None:
                warptrace.start(folder / f"inproc-{repeat}-{name}.wtrace", record_steps=schedule)
            try:
                start = time.thread_time()
                for _ in range(block):
                    step()
                per = (time.thread_time() - start) / block * 1e6
            finally:
                if schedule is not None:
                    warptrace.stop()
            best[name] = min(best.get(name, per), per)
    print(
        f"in one process, {block} iterations per block, minimum of {repeats} (main-thread CPU µs per iteration):"
    )
    print(f"  plain {best['plain']:.1f}   paused {best['paused']:.1f} (+{best['paused'] - best['plain']:.1f})   "
          f"recorded {best['recorded']:.1f} (+{best['recorded'] - best['plain']:.1f})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iters", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--no-full", action="store_true", help="skip the full recording (the slowest)")
    parser.add_argument(
        "--in-process",
        type=int,
        metavar="REPEATS",
        default=0,
        help="instead: plain / paused / recorded blocks of --iters iterations in one process, the "
        "minimum of REPEATS (the overhead outside recorded steps, steadier on a loaded machine)",
    )
    args = parser.parse_args()
    if args.in_process:
        with tempfile.TemporaryDirectory(prefix="bench_schedule_") as folder:
            script = Path(folder) / "loop.py"
            script.write_text(SCRIPT)
            in_process(script, args.iters, args.in_process, Path(folder))
        return
    iters = args.iters
    mid = iters // 2
    modes: list[tuple[str, list[str] | None]] = [
        ("plain", None),
        ("steps: 10", ["--record-steps", f"0-4,{mid}-{mid + 4}"]),
        ("steps: 100", ["--record-steps", f"0-49,{mid}-{mid + 49}"]),
        ("steps: 1000", ["--record-steps", f"0-499,{mid}-{mid + 499}"]),
        ("last: 10", ["--record-last", "10"]),
    ]
    if not args.no_full:
        modes.append(("full", []))
    from warptrace.record.native import summary

    print(f"{iters} iterations, {args.runs} run(s) per mode; {summary()}")
    results: dict[str, list[dict[str, float]]] = {name: [] for name, _ in modes}
    with tempfile.TemporaryDirectory(prefix="bench_schedule_") as folder:
        script = Path(folder) / "loop.py"
        script.write_text(SCRIPT)
        for _ in range(args.runs):
            for name, options in modes:
                out = Path(folder) / "run.wtrace"
                results[name].append(run_mode(script, iters, options, out))
    plain = {k: statistics.median(r[k] for r in results["plain"]) for k in ("wall", "cpu")}
    header = (
        f"{'mode':<12} {'loop s':>7} {'main CPU s':>10} {'CPU over':>8} {'us/iter':>8} {'us/rec. step':>12} "
        f"{'trace MB':>9} {'events':>8} {'steps':>6}"
    )
    print(header)
    print("-" * len(header))
    for name, _ in modes:
        rows = results[name]
        wall = statistics.median(r["wall"] for r in rows)
        cpu = statistics.median(r["cpu"] for r in rows)
        if name == "plain":
            print(f"{name:<12} {wall:>7.2f} {cpu:>10.2f}")
            continue
        recorded = int(rows[0]["recorded"])
        over = cpu - plain["cpu"]
        size = statistics.median(r["bytes"] for r in rows) / 1e6
        events = int(statistics.median(r["events"] for r in rows))
        print(
            f"{name:<12} {wall:>7.2f} {cpu:>10.2f} {over:>8.2f} {over / iters * 1e6:>8.2f} "
            f"{over / max(recorded, 1) * 1e6:>12.1f} {size:>9.3f} {events:>8} {recorded:>6}"
        )


if __name__ == "__main__":
    main()
