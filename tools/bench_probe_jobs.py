"""Probe runs side by side: ``gradcheck --jobs N`` against the serial ``gradcheck``.

    python tools/bench_probe_jobs.py                 # --jobs 2 vs 1, 3 repeats, a table
    python tools/bench_probe_jobs.py --jobs 2 4 --repeat 5 --iters 4000
    python tools/bench_probe_jobs.py --command bisect

Writes a small Warp program into a scratch folder (a smooth loss over ``--size`` values,
each computed by a kernel looping ``--iters`` times, forward and adjoint on the CPU, so one
probe run takes a few seconds of compute beside Python's and Warp's start), runs it once
to fill Warp's kernel cache, then times ``python -m warptrace gradcheck --format json`` on
it serially and with each ``--jobs N``, alternating (serial, N, serial, N, ...) so that a
change of the machine's load hits both. Per setting: the wall time of each repeat (the
whole command, measured here), the mean wall time of one probe run (from the report), and
the ratio of the median wall times to the serial one. The verdicts and every measured
number (the JSON report without its timing) must be identical to the serial one: exit
status 1 when one differs, or when ``--target`` is given and the ratio of ``--jobs 2``
exceeds it.

The ratio depends on the machine's free cores: on a machine whose cores other work keeps
busy, runs side by side slow each other down. ``os.getloadavg()`` is printed before and
after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROGRAM = """
import numpy as np
import warp as wp

wp.config.quiet = True
SIZE, ITERS = {size}, {iters}


@wp.kernel
def smooth(x: wp.array(dtype=float), iters: int, y: wp.array(dtype=float)):
    i = wp.tid()
    v = x[i]
    acc = float(0.0)
    for k in range(iters):
        acc += wp.sin(v * (1.0 + float(k) * 1.0e-4))
    y[i] = acc / float(iters)


@wp.kernel
def square_sum(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i] * y[i])


x = wp.array(np.linspace(0.1, 1.0, SIZE), dtype=float, requires_grad=True, device="cpu")
y = wp.zeros(SIZE, dtype=float, requires_grad=True, device="cpu")
loss = wp.zeros(1, dtype=float, requires_grad=True, device="cpu")
tape = wp.Tape()
with tape:
    wp.launch(smooth, SIZE, inputs=[x, ITERS], outputs=[y], device="cpu")
    wp.launch(square_sum, SIZE, inputs=[y], outputs=[loss], device="cpu")
tape.backward(loss)
print(float(loss.numpy()[0]), float(np.abs(x.grad.numpy()).sum()))
"""

TIMING = ("runs", "elapsed_s", "parallel")


def run_gradcheck(command: str, script: Path, jobs: int) -> tuple[float, dict[str, Any]]:
    argv = [sys.executable, "-m", "warptrace", command]
    if command == "bisect":
        argv.append("--run")
    argv += ["-q", "--format", "json", "--jobs", str(jobs), str(script)]
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=script.parent, check=False)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1, 4):
        sys.exit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return wall, json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[2], help="job counts to compare with 1")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--size", type=int, default=4096, help="values the kernel computes")
    parser.add_argument("--iters", type=int, default=2000, help="loop iterations per value")
    parser.add_argument("--command", choices=("gradcheck", "bisect"), default="gradcheck")
    parser.add_argument("--target", type=float, default=None, help="exit 1 when --jobs 2's ratio exceeds it")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="bench-probe-jobs-"))
    script = scratch / "smooth_loss.py"
    script.write_text(PROGRAM.format(size=args.size, iters=args.iters))
    started = time.perf_counter()
    subprocess.run([sys.executable, str(script)], check=True, capture_output=True, cwd=scratch)
    print(
        f"program: {args.size} values x {args.iters} iterations; one plain run {time.perf_counter() - started:.1f} s"
    )
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())} ({os.cpu_count()} CPUs)")

    settings = [1, *args.jobs]
    walls: dict[int, list[float]] = {jobs: [] for jobs in settings}
    run_means: dict[int, list[float]] = {jobs: [] for jobs in settings}
    reference: dict[str, Any] | None = None
    identical = True
    for _ in range(args.repeat):
        for jobs in settings:
            wall, result = run_gradcheck(args.command, script, jobs)
            walls[jobs].append(wall)
            runs = result["runs"]
            run_means[jobs].append(sum(r["wall_s"] for r in runs) / len(runs))
            measured = {key: value for key, value in result.items() if key not in TIMING}
            if reference is None:
                reference = measured
                print(f"verdict: {result['verdict']} ({len(runs)} probe runs)")
            elif measured != reference:
                identical = False
                print(f"--jobs {jobs}: the report differs from the serial one")
    print(f"load average after:  {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    serial = statistics.median(walls[1])
    print(f"\n{'jobs':>4}  {'wall s (each repeat)':<28} {'median':>7} {'one run s':>9} {'ratio':>6}")
    for jobs in settings:
        median = statistics.median(walls[jobs])
        each = " ".join(f"{w:.1f}" for w in walls[jobs])
        mean_run = statistics.mean(run_means[jobs])
        print(f"{jobs:>4}  {each:<28} {median:>7.1f} {mean_run:>9.2f} {median / serial:>6.2f}")
    print(f"\nverdicts and measured numbers identical to serial: {'yes' if identical else 'NO'}")
    ratio = statistics.median(walls[2]) / serial if 2 in walls else None
    if not identical or (args.target is not None and ratio is not None and ratio > args.target):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
