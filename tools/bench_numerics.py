"""Cost of ``--check-numerics`` on a real program: plain vs traced vs traced with summaries.

    python tools/bench_numerics.py                                  # Warp's particle_repulsion example
    python tools/bench_numerics.py -m warp.examples.optim.example_fluid_checkpoint --device cpu ...

Each mode runs the module in its own process (``python -m MODULE ARGS``, then
``python -m warptrace -q --no-analyze [--check-numerics] -m MODULE ARGS``), after one
warm-up run that compiles the kernels; wall time is the minimum over ``--repeat`` runs.
Also checks that stdout is identical in the three modes (results bit-identical) and
prints what the numerics WT5xx analysis found. The recording-overhead micro-benchmark
with a numerics mode is ``tools/bench_record.py``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT = [
    "-m",
    "warp.examples.optim.example_particle_repulsion",
    "--device",
    "cpu",
    "--num-frames",
    "20",
    "--headless",
]


def _run(command: list[str], cwd: str) -> tuple[float, str]:
    start = time.perf_counter()
    out = subprocess.run(command, capture_output=True, text=True, cwd=cwd, check=True)
    return time.perf_counter() - start, out.stdout


def _normalize(text: str) -> str:
    return re.sub(r"\d+(\.\d+)? ?(ms|s)\b", "<t>", text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "program", nargs=argparse.REMAINDER, help="-m MODULE ARGS (default: particle_repulsion)"
    )
    args = parser.parse_args(argv)
    program = args.program or DEFAULT
    py = sys.executable
    work = tempfile.mkdtemp(prefix="wt_bench_numerics_")
    trace = str(Path(work) / "run.wtrace")
    modes = {
        "plain": [py, *program],
        "traced": [py, "-m", "warptrace", "-q", "--no-analyze", "-o", trace, *program],
        "numerics": [py, "-m", "warptrace", "-q", "--no-analyze", "--check-numerics", "-o", trace, *program],
    }
    _run(modes["plain"], work)  # compile / load the kernels
    times: dict[str, float] = {}
    outputs: dict[str, str] = {}
    for _ in range(args.repeat):
        for mode, command in modes.items():
            wall, out = _run(command, work)
            times[mode] = min(times.get(mode, wall), wall)
            outputs[mode] = _normalize(out)
    report = subprocess.run(
        [py, "-m", "warptrace", "analyze", "--format", "json", trace],
        capture_output=True,
        text=True,
        cwd=work,
    )
    findings = json.loads(report.stdout)["findings"] if report.stdout else []
    print(f"program: {' '.join(program)}  [wall s, min of {args.repeat}]")
    for mode in modes:
        print(f"  {mode:8s} {times[mode]:8.2f} s  ({times[mode] / times['plain']:.2f}x plain)")
    print(f"  numerics vs traced: {times['numerics'] / times['traced']:.2f}x")
    same = outputs["plain"] == outputs["traced"] == outputs["numerics"]
    print(f"  stdout identical in the three modes: {same}")
    print(f"  findings with summaries: {[f['code'] for f in findings] or 'none'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
