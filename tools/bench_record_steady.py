"""Steady-state recording overhead: bench_record's loops as scripts, plain vs ``python -m warptrace``.

    python tools/bench_record_steady.py                   # (b) and (e), two runs each
    python tools/bench_record_steady.py e --iters 3000 --runs 3

``tools/bench_record.py`` times short blocks inside one process (``start()``/``stop()``
around each), so its wall time includes encoding every row of a block at its final flush.
A user runs a long script under the CLI: the trace-writer process encodes while the program
runs. This tool measures that: the loop of (b) (a small training step: 3 layers, copy, loss,
backward, SGD, ``tape.zero()``) or of (e) (51 ``zeros(requires_grad)``, 51 taped launches,
backward, ``numpy()``, a new parameter array, ``tape.zero()``) runs ``--iters`` times in a
script of its own, plainly and with ``python -m warptrace -q --no-analyze``, alternated
``--runs`` times. The script times its own loop after a warm-up (startup, imports, kernel
loading and the final ``stop()`` are not in the figure): wall time, and CPU time of the
program's thread (``main``). Reported per iteration and as traced/plain ratios, with the
garbage collector's collections per generation during the loop (``gc`` young/middle/full):
a count this VM's speed does not move, where a full collection walks the whole heap (the
sixteenth round found the recorder doubling them in (e); see docs/dev/history.md).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

COMMON = r"""
import sys, time
import numpy as np
import warp as wp
import warp.optim

wp.config.quiet = True
wp.init()
device = "cpu"
iters = int(sys.argv[1])


@wp.kernel
def layer(x: wp.array(dtype=float), w: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.tanh(w[i] * x[i] + 0.1)


@wp.kernel
def integrate(x: wp.array(dtype=float), p: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] + 0.01 * wp.sin(p[i] * x[i])


@wp.kernel
def loss_kernel(y: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - target[i]
    wp.atomic_add(loss, 0, d * d)
"""

LOOPS = {
    "b": r"""
rng = np.random.default_rng(0)
n = 64
x0 = wp.array(rng.standard_normal(n).astype(np.float32), device=device)
target = wp.array(rng.standard_normal(n).astype(np.float32), device=device)
weights = [wp.array(rng.standard_normal(n).astype(np.float32), requires_grad=True) for _ in range(3)]
hidden = [wp.zeros(n, requires_grad=True, device=device) for _ in range(3)]
staged = wp.zeros(n, requires_grad=True, device=device)
loss = wp.zeros(1, requires_grad=True, device=device)
optimizer = warp.optim.SGD(weights, lr=1e-3)


def iteration():
    tape = wp.Tape()
    with tape:
        source = x0
        for w, h in zip(weights, hidden):
            wp.launch(layer, dim=n, inputs=[source, w], outputs=[h], device=device)
            source = h
        wp.copy(staged, source)
        loss.zero_()
        wp.launch(loss_kernel, dim=n, inputs=[staged, target], outputs=[loss], device=device)
    tape.backward(loss)
    optimizer.step([w.grad for w in weights])
    tape.zero()
""",
    "e": r"""
small = 16
state = {"p": wp.array(np.full(small, 0.5, dtype=np.float32), requires_grad=True, device=device)}
target = wp.array(np.ones(small, dtype=np.float32), device=device)


def iteration():
    p = state["p"]
    states = [wp.zeros(small, dtype=float, requires_grad=True, device=device) for _ in range(51)]
    states[0].fill_(1.0)
    lval = wp.zeros(1, dtype=float, requires_grad=True, device=device)
    tape = wp.Tape()
    with tape:
        for i in range(50):
            wp.launch(integrate, dim=small, inputs=[states[i], p], outputs=[states[i + 1]], device=device)
        wp.launch(loss_kernel, dim=small, inputs=[states[50], target], outputs=[lval], device=device)
    tape.backward(lval)
    g = p.grad.numpy()
    state["p"] = wp.array(p.numpy() - 1e-3 * g, requires_grad=True, device=device)
    tape.zero()
""",
}

TIMED = r"""
for _ in range(20):
    iteration()
import gc
before = [s["collections"] for s in gc.get_stats()]
wall, main = time.perf_counter(), time.thread_time()
for _ in range(iters):
    iteration()
wall, main = time.perf_counter() - wall, time.thread_time() - main
gcs = "/".join(str(s["collections"] - b) for s, b in zip(gc.get_stats(), before))
print(f"WARPTRACE_BENCH wall={wall / iters * 1e6:.2f} main={main / iters * 1e6:.2f} gc={gcs}", file=sys.stderr)
"""

DEFAULT_ITERS = {"b": 10000, "e": 1500}
_RESULT = re.compile(r"WARPTRACE_BENCH wall=([0-9.]+) main=([0-9.]+) gc=([0-9/]+)")


def chosen_loops(parser: argparse.ArgumentParser, names: list[str]) -> list[str]:
    """The loops named on the command line (all of them when none is); a usage error for a
    name that is not one."""
    unknown = [name for name in names if name not in LOOPS]
    if unknown:
        parser.error(f"unknown loop {unknown[0]!r} (choose from {', '.join(LOOPS)})")
    return names or list(LOOPS)


def run_once(script: Path, iters: int, traced: bool, folder: Path) -> tuple[float, float, str]:
    """(wall, main) µs per iteration of one run, and its collections per generation."""
    argv = [sys.executable]
    if traced:
        argv += ["-m", "warptrace", "-q", "--no-analyze", "-o", str(folder / "run.wtrace")]
    argv += [str(script), str(iters)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=folder)
    match = _RESULT.search(done.stderr)
    if done.returncode != 0 or match is None:
        raise RuntimeError(f"{' '.join(argv)} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return float(match.group(1)), float(match.group(2)), match.group(3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("loops", nargs="*", help="b, e (default: both)")
    parser.add_argument("--iters", type=int, help="iterations timed per run (default: b 10000, e 1500)")
    parser.add_argument("--runs", type=int, default=2, help="plain and traced runs, alternated (default 2)")
    args = parser.parse_args(argv)
    loops = chosen_loops(parser, args.loops)
    print(f"{'loop':5} {'run':4} {'plain wall':>11} {'traced wall':>12} {'ratio':>6} {'plain main':>11} "
          f"{'traced main':>12} {'ratio':>6} {'plain gc':>12} {'traced gc':>12}  (µs per iteration)")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="wt-steady-") as tmp:
        folder = Path(tmp)
        for name in loops:
            script = folder / f"loop_{name}.py"
            script.write_text(COMMON + LOOPS[name] + TIMED)
            iters = args.iters or DEFAULT_ITERS[name]
            for run in range(1, args.runs + 1):
                plain = run_once(script, iters, False, folder)
                traced = run_once(script, iters, True, folder)
                print(
                    f"({name})   {run:<4} {plain[0]:11.1f} {traced[0]:12.1f} {traced[0] / plain[0]:6.2f} "
                    f"{plain[1]:11.1f} {traced[1]:12.1f} {traced[1] / plain[1]:6.2f} {plain[2]:>12} {traced[2]:>12}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
