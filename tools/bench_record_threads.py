"""Instructions per loop iteration, thread by thread: bench_record_steady's loops under callgrind.

    python tools/bench_record_threads.py            # loops (b) and (e)
    python tools/bench_record_threads.py b --iters 300

Each loop of ``tools/bench_record_steady.py`` runs plain and traced (``python -m warptrace``)
under ``valgrind --tool=callgrind --separate-threads=yes``, twice each: ``--iters`` and three
times as many iterations after the same warm-up. The difference between the two runs of a
mode, divided by the iterations between them, is what one iteration costs each thread in
steady state (imports, kernel loading, warm-up and the final flush cancel out). Reported:
the program's thread plain and traced, and the recorder's writer thread (the one that hands
the flushed rows to the trace-writer process: what it does holds the interpreter lock, which
the program's thread then waits for). The trace-writer process itself is another process, on
the other core, and is not counted.

Why: on this 2-core VM ``bench_record_steady.py`` measures wall and thread time, which the
machine's load moves by several percent; instruction counts do not move with load. They do
not show cache misses or waits either: the program's thread runs the recorder's added
instructions at about a third of the rate it runs Warp's CPU kernels, so a ratio of
instructions is a lower bound on the ratio of times.

Needs ``valgrind``; exit status 2 without it. Kernels should be in Warp's cache first (run
the loop once): the counts of runs that compile differ by the compilation. Each run takes
one to two minutes (callgrind is 30-50x slower); the four runs of a loop go two at a time.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_record_steady import COMMON, LOOPS, TIMED, chosen_loops

DEFAULT_ITERS = {"b": 300, "e": 100}
_SUMMARY = re.compile(r"^summary:\s*(\d+)", re.MULTILINE)


def _run(
    python: str, script: Path, iters: int, traced: bool, folder: Path, tag: str
) -> subprocess.Popen[bytes]:
    argv = [
        "valgrind",
        "--tool=callgrind",
        "--separate-threads=yes",
        f"--callgrind-out-file={folder / tag}.%p.out",
    ]
    argv += [python]
    if traced:
        argv += ["-m", "warptrace", "-q", "--no-analyze", "-o", str(folder / f"{tag}.wtrace")]
    argv += [str(script), str(iters)]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=folder)


def _threads(folder: Path, tag: str) -> list[int]:
    """Instructions of each thread of one run, in thread order (1: the program's thread)."""
    files = sorted(folder.glob(f"{tag}.*.out-*"), key=lambda f: int(f.name.rsplit("-", 1)[1]))
    counts = []
    for f in files:
        match = _SUMMARY.search(f.read_text(errors="replace"))
        counts.append(int(match.group(1)) if match else 0)
    return counts


def measure(python: str, name: str, iters: int, folder: Path) -> dict[str, float]:
    """Per-iteration instructions: plain and traced program thread, traced writer thread."""
    script = folder / f"loop_{name}.py"
    script.write_text(COMMON + LOOPS[name] + TIMED)
    per: dict[str, list[int]] = {}
    for traced in (False, True):
        mode = "traced" if traced else "plain"
        runs = [_run(python, script, n, traced, folder, f"{mode}_{name}_{n}") for n in (iters, 3 * iters)]
        for run in runs:
            if run.wait() != 0:
                raise RuntimeError(f"{mode} loop ({name}) failed under valgrind (exit {run.returncode})")
        short, long = (_threads(folder, f"{mode}_{name}_{n}") for n in (iters, 3 * iters))
        per[mode] = [(b - a) // (2 * iters) for a, b in zip(short, long)]
    plain, traced = per["plain"], per["traced"]
    # the traced run's threads: the program's, Warp's or pyarrow's helpers (if any), and the
    # writer thread, the last one the recorder starts: the one that grows with the iterations
    writer = max(traced[1:], default=0)
    return {"plain": plain[0], "traced": traced[0], "writer": writer}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("loops", nargs="*", help="b, e (default: both)")
    parser.add_argument("--iters", type=int, help="iterations of the shorter run (default: b 300, e 100)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter with warp and warptrace")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("bench_record_threads: valgrind is not on the PATH", file=sys.stderr)
        return 2
    loops = chosen_loops(parser, args.loops)
    print(f"{'loop':5} {'plain':>11} {'traced':>11} {'ratio':>6} {'writer':>10} {'of plain':>8}  "
          "(instructions per iteration; program's thread, and the recorder's writer thread)")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="wt-threads-") as tmp:
        for name in loops:
            m = measure(args.python, name, args.iters or DEFAULT_ITERS[name], Path(tmp))
            print(
                f"({name})   {m['plain']:11,.0f} {m['traced']:11,.0f} {m['traced'] / m['plain']:6.3f} "
                f"{m['writer']:10,.0f} {m['writer'] / m['plain']:8.1%}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
