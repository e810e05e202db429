"""Recording overhead benchmark (DESIGN.md §7): plain vs traced vs --check-numerics vs Warp's verify flag.

    python tools/bench_record.py                       # the table
    python tools/bench_record.py --launches 20000 --steps 200 --repeat 7
    python tools/bench_record.py --python /path/to/venv-3.13/bin/python   # under another Python

(a) ``--launches`` tiny launches inside one ``wp.Tape`` (launch-bound, so the
    recording cost shows fully), in µs per launch;
(b) a small training loop (3 forward kernels, a copy, loss, ``tape.backward``,
    ``wp.optim.SGD`` step, ``tape.zero``), in µs per step;
(c) trace size: bytes per access row and per event on disk;
(d) per-operation rows on 16-element arrays (``--ops N`` operations per block): a launch
    outside and inside a tape, backward per recorded launch, ``wp.zeros(n,
    requires_grad=True)``, ``array.zero_()``, ``wp.copy``, ``wp.array(ndarray,
    requires_grad=True)`` (an upload from NumPy), ``array.numpy()``, one gradient zeroed by
    ``tape.zero()`` (a tape holding 16);
(e) an allocation-heavy training loop (``--loop-iters``): each iteration allocates its
    51 state arrays with ``requires_grad``, records 51 launches, runs backward, reads the
    gradient with ``numpy()``, builds a new parameter array and calls ``tape.zero()``.

Plain and traced blocks alternate in one process (``start()``/``stop()`` around each
traced block), so machine load drifts hit both alike. A traced block measures the
steady state of a long run: inside its session the block runs once untimed (first
registrations, call sites) and a flush starts the trace-writer process, then the timed
run ends with ``warptrace.flush()``, so every row it recorded is on disk inside the
timed span and short blocks do not hide the cost of writing; ``start``/``stop``
themselves are not timed. CPU time counts all threads and the trace-writer process. Warp's verify flag changes
module hashes and forces a native recompile, so that mode runs in its own process.
Wall time is the minimum over ``--repeat`` blocks (the least disturbed run); CPU time
(all threads, including warptrace's writer thread) is the median. Kernels are
compiled or loaded from the cache before timing.
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
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def _child(mode: str, launches: int, steps: int, repeat: int, ops: int, loop_iters: int) -> dict[str, Any]:
    import warp as wp
    import warp.optim

    wp.config.quiet = True
    if mode == "verify":
        wp.config.verify_autograd_array_access = True
    sys.path.insert(0, str(REPO))
    import warptrace
    from warptrace.record import recorder
    from warptrace.record.recorder import flush

    @wp.kernel
    def tiny(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = x[i] * 2.0

    @wp.kernel
    def layer(x: wp.array(dtype=float), w: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.tanh(w[i] * x[i] + 0.1)

    @wp.kernel
    def loss_kernel(y: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
        i = wp.tid()
        d = y[i] - target[i]
        wp.atomic_add(loss, 0, d * d)

    device = "cpu"
    x = wp.array(np.ones(8, dtype=np.float32), device=device)
    y = wp.zeros(8, dtype=float, device=device)
    for _ in range(200):  # compile/load, warm caches
        wp.launch(tiny, dim=8, inputs=[x], outputs=[y], device=device)

    def launch_block() -> None:
        tape = wp.Tape()
        with tape:
            for _ in range(launches):
                wp.launch(tiny, dim=8, inputs=[x], outputs=[y], device=device)
        tape.reset()

    rng = np.random.default_rng(0)
    n = 64
    x0 = wp.array(rng.standard_normal(n).astype(np.float32), device=device)
    target = wp.array(rng.standard_normal(n).astype(np.float32), device=device)
    weights = [wp.array(rng.standard_normal(n).astype(np.float32), requires_grad=True) for _ in range(3)]
    hidden = [wp.zeros(n, requires_grad=True, device=device) for _ in range(3)]
    staged = wp.zeros(n, requires_grad=True, device=device)
    loss = wp.zeros(1, requires_grad=True, device=device)
    optimizer = warp.optim.SGD(weights, lr=1e-3)

    def step() -> None:
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

    def step_block() -> None:
        for _ in range(steps):
            step()

    small = 16
    a16 = wp.array(np.ones(small, dtype=np.float32), requires_grad=True, device=device)
    b16 = wp.zeros(small, requires_grad=True, device=device)

    def op_launch() -> None:
        for _ in range(ops):
            wp.launch(tiny, dim=small, inputs=[a16], outputs=[b16], device=device)

    def op_launch_taped() -> None:
        tape = wp.Tape()
        with tape:
            for _ in range(ops):
                wp.launch(tiny, dim=small, inputs=[a16], outputs=[b16], device=device)
        tape.reset()

    def op_backward() -> None:
        tape = wp.Tape()
        with tape:
            for _ in range(ops):
                wp.launch(tiny, dim=small, inputs=[a16], outputs=[b16], device=device)
        tape.backward(grads={b16: b16.grad})
        tape.reset()

    def op_zeros() -> None:
        for _ in range(ops):
            wp.zeros(small, dtype=float, requires_grad=True, device=device)

    def op_zero() -> None:
        for _ in range(ops):
            b16.zero_()

    def op_copy() -> None:
        for _ in range(ops):
            wp.copy(b16, a16)

    host16 = np.linspace(0.0, 1.0, small, dtype=np.float32)

    def op_from_numpy() -> None:
        for _ in range(ops):
            wp.array(host16, requires_grad=True, device=device)

    def op_numpy() -> None:
        for _ in range(ops):
            b16.numpy()

    # a tape holding 16 gradients: one op is one gradient zeroed by tape.zero()
    zero_chain = [wp.zeros(small, dtype=float, requires_grad=True, device=device) for _ in range(17)]
    zero_tape = wp.Tape()
    with zero_tape:
        for i in range(16):
            wp.launch(tiny, dim=small, inputs=[zero_chain[i]], outputs=[zero_chain[i + 1]], device=device)
    zero_tape.backward(grads={zero_chain[16]: wp.ones(small, dtype=float, device=device)})

    def op_tape_zero() -> None:
        for _ in range(ops // 16):
            zero_tape.zero()

    @wp.kernel
    def integrate(x: wp.array(dtype=float), p: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = x[i] + 0.01 * wp.sin(p[i] * x[i])

    loop_state = {"p": wp.array(np.full(small, 0.5, dtype=np.float32), requires_grad=True, device=device)}
    loop_target = wp.array(np.ones(small, dtype=np.float32), device=device)

    def loop_iteration() -> None:
        p = loop_state["p"]
        states = [wp.zeros(small, dtype=float, requires_grad=True, device=device) for _ in range(51)]
        states[0].fill_(1.0)
        lval = wp.zeros(1, dtype=float, requires_grad=True, device=device)
        tape = wp.Tape()
        with tape:
            for i in range(50):
                wp.launch(integrate, dim=small, inputs=[states[i], p], outputs=[states[i + 1]], device=device)
            wp.launch(loss_kernel, dim=small, inputs=[states[50], loop_target], outputs=[lval], device=device)
        tape.backward(lval)
        g = p.grad.numpy()
        loop_state["p"] = wp.array(p.numpy() - 1e-3 * g, requires_grad=True, device=device)
        tape.zero()

    def loop_block() -> None:
        for _ in range(loop_iters):
            loop_iteration()

    for warm in (op_launch, op_launch_taped, op_backward, op_zeros, op_zero, op_copy, op_numpy, op_tape_zero):
        warm()
    loop_iteration()

    for _ in range(5):
        step()

    tmp = Path(tempfile.mkdtemp(prefix="wt_bench_"))
    traces: list[Path] = []

    def child_cpu() -> float:
        """CPU seconds of the trace-writer process so far (Linux /proc; 0 without one)."""
        rec = recorder.active()
        sink = getattr(rec, "sink", None)
        if sink is None:
            return 0.0
        try:
            fields = Path(f"/proc/{sink.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return 0.0

    def recorded_so_far() -> int:
        """Operations the session recorded so far: its events (launches, adjoint launches,
        memsets, copies, value reads, tape events) and its allocations."""
        rec = recorder.active()
        return 0 if rec is None else rec.seq + rec.ident.next_alloc

    recorded: dict[str, list[int]] = {}

    def timed(
        block: Callable[[], None], traced: bool, numerics: bool = False, name: str = ""
    ) -> tuple[float, float, float]:
        recording = traced or numerics
        if numerics:
            warptrace.start(tmp / f"numerics{time.perf_counter_ns()}.wtrace", numerics=True)
        elif traced:
            traces.append(tmp / f"run{len(traces)}.wtrace")
            warptrace.start(traces[-1])
        if recording:
            # the steady state of a long run: first registrations done, the trace-writer
            # process started (a flush the run's size asks for starts it), nothing buffered
            block()
            rec = recorder.active()
            assert rec is not None
            rec.flush()
            flush()
        child = child_cpu()
        before = recorded_so_far()
        wall, cpu, main = time.perf_counter(), time.process_time(), time.thread_time()
        block()
        if traced:
            recorded.setdefault(name, []).append(recorded_so_far() - before)
        if recording:
            flush()  # writing the block's rows is part of its cost (returns once on disk)
        wall, cpu, main = time.perf_counter() - wall, time.process_time() - cpu, time.thread_time() - main
        cpu += child_cpu() - child
        if recording:
            warptrace.stop()  # fixed costs of a session (restoring Warp, meta.json): not per operation
        return wall, cpu, main

    modes = ["plain", "traced", "numerics"] if mode == "compare" else ["plain"]
    result: dict[str, Any] = {}
    blocks: list[tuple[str, Callable[[], None], int]] = [
        ("launch", launch_block, launches),
        ("step", step_block, steps),
        ("loop", loop_block, loop_iters),
    ]
    blocks += [(f"op_{name}", fn, ops) for name, fn in _ops_of(locals())]
    for name, block, count in blocks:
        samples: dict[str, list[tuple[float, float, float]]] = {m: [] for m in modes}
        for _ in range(repeat):
            for m in modes:
                samples[m].append(timed(block, m == "traced", m == "numerics", name))
        for m in modes:
            label = m if mode == "compare" else "verify"
            result[f"{label}_{name}_wall_us"] = min(s[0] for s in samples[m]) / count * 1e6
            result[f"{label}_{name}_cpu_us"] = statistics.median(s[1] for s in samples[m]) / count * 1e6
            result[f"{label}_{name}_main_us"] = statistics.median(s[2] for s in samples[m]) / count * 1e6
            result[f"{label}_{name}_main_min_us"] = min(s[2] for s in samples[m]) / count * 1e6
        if name in recorded:
            result[f"recorded_{name}"] = statistics.median(recorded[name]) / count
    from warptrace.record import native

    result["recorder"] = native.summary()
    result["python"] = sys.version.split()[0]
    result["final_loss"] = float(loss.numpy()[0])
    result["loop_param_sum"] = float(loop_state["p"].numpy().sum())

    if mode == "compare":
        import pyarrow.parquet as pq

        for which, trace in (("launch", traces[0]), ("step", traces[-1])):
            for table in ("accesses", "events"):
                files = list((trace / table).glob("part-*.parquet"))
                rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
                size = sum(f.stat().st_size for f in files)
                result[f"{which}_{table}_rows"] = rows
                result[f"{which}_{table}_bytes_per_row"] = size / max(rows, 1)
    return result


OPS = (
    ("launch", "op_launch", "wp.launch outside a tape"),
    ("launch_taped", "op_launch_taped", "wp.launch inside a tape"),
    ("backward", "op_backward", "launch + backward, per recorded launch"),
    ("zeros", "op_zeros", "wp.zeros(16, requires_grad=True)"),
    ("zero", "op_zero", "array.zero_()"),
    ("copy", "op_copy", "wp.copy(b, a)"),
    ("from_numpy", "op_from_numpy", "wp.array(ndarray, requires_grad=True)"),
    ("numpy", "op_numpy", "array.numpy()"),
    ("tape_zero", "op_tape_zero", "a gradient zeroed by tape.zero()"),
)


def _ops_of(scope: dict[str, Any]) -> list[tuple[str, Callable[[], None]]]:
    return [(name, scope[fn]) for name, fn, _ in OPS]


def _run(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    out = subprocess.run(
        [args.python, __file__, "--mode", mode, "--launches", str(args.launches),
         "--steps", str(args.steps), "--repeat", str(args.repeat), "--ops", str(args.ops),
         "--loop-iters", str(args.loop_iters)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--mode", choices=("compare", "verify"), help=argparse.SUPPRESS)
    parser.add_argument("--launches", type=int, default=20000)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--ops", type=int, default=2000, help="operations per block of a (d) row")
    parser.add_argument("--loop-iters", type=int, default=20, help="iterations per block of (e)")
    parser.add_argument("--no-verify", action="store_true", help="skip the Warp-tracker process")
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="the interpreter that runs the measured processes (one with warp-lang, numpy and pyarrow; "
        "warptrace is this checkout, with the compiled modules built for that interpreter if any)",
    )
    args = parser.parse_args(argv)
    if args.mode:
        print(
            json.dumps(_child(args.mode, args.launches, args.steps, args.repeat, args.ops, args.loop_iters))
        )
        return 0

    r = _run("compare", args)
    modes = ("plain", "traced", "numerics") if args.no_verify else ("plain", "traced", "numerics", "verify")
    if not args.no_verify:
        r.update(_run("verify", args))
    print(f"Python {r['python']}, {r['recorder']} (WARPTRACE_PURE_PYTHON=1 selects the Python source)")
    print(f"(d) per operation on 16-element arrays [µs/op, min of {args.repeat} alternating blocks]")
    print("    main: CPU time of the program's thread (steadier than wall on a shared machine)")
    print("    recorded: the operations one call records (events and allocations, counted by the session)")
    print("    per rec.: main added per recorded operation (the issue's measure: one wp.copy of arrays with")
    print("    gradients records two copies, one wp.zeros(requires_grad=True) two allocations)")
    print(
        f"    {'operation':40s} {'wall plain':>10s} {'traced':>8s} {'added':>7s} {'main plain':>10s} {'traced':>8s}"
        f" {'added':>7s} {'recorded':>8s} {'per rec.':>8s}"
        + ("" if args.no_verify else f" {'tracker':>8s} {'added':>7s}")
    )
    for name, _key, what in OPS:
        plain, traced = r[f"plain_op_{name}_wall_us"], r[f"traced_op_{name}_wall_us"]
        mplain, mtraced = r[f"plain_op_{name}_main_min_us"], r[f"traced_op_{name}_main_min_us"]
        count = r.get(f"recorded_op_{name}", 0.0)
        per = f"{(mtraced - mplain) / count:+8.2f}" if count else f"{'-':>8s}"
        line = (
            f"    {what:40s} {plain:10.2f} {traced:8.2f} {traced - plain:+7.2f} {mplain:10.2f} {mtraced:8.2f}"
            f" {mtraced - mplain:+7.2f} {count:8.2f} {per}"
        )
        if not args.no_verify:
            verify = r[f"verify_op_{name}_main_min_us"]
            line += f" {verify:8.2f} {verify - mplain:+7.2f}"
        print(line)
    for name, what, unit in (
        ("launch", f"(a) {args.launches} tiny launches inside a tape", "µs/launch"),
        ("step", "(b) training step: 3 layers, copy, loss, backward, SGD, tape.zero", "µs/step"),
        (
            "loop",
            "(e) allocation-heavy loop: 51 zeros(requires_grad), 51 launches, backward, numpy",
            "µs/iter",
        ),
    ):
        print(f"{what} [{unit}; wall = min, cpu/main = median of {args.repeat}]")
        print("    cpu: all threads and the trace-writer process; main: the program's thread only")
        for mode in modes:
            print(
                f"    {mode:7s} wall {r[f'{mode}_{name}_wall_us']:9.2f}   cpu {r[f'{mode}_{name}_cpu_us']:9.2f}"
                f"   main {r[f'{mode}_{name}_main_us']:9.2f}"
            )
        for mode in modes[1:]:
            dw = r[f"{mode}_{name}_wall_us"] - r[f"plain_{name}_wall_us"]
            dc = r[f"{mode}_{name}_cpu_us"] - r[f"plain_{name}_cpu_us"]
            dm = r[f"{mode}_{name}_main_us"] - r[f"plain_{name}_main_us"]
            ratio = r[f"{mode}_{name}_wall_us"] / r[f"plain_{name}_wall_us"]
            print(f"    {mode} adds: wall {dw:+.2f}, cpu {dc:+.2f}, main {dm:+.2f} ({ratio:.3f}x wall)")
    print("(c) trace size on disk")
    for name in ("launch", "step"):
        print(
            f"    {name:6s} run: {r[f'{name}_accesses_bytes_per_row']:5.1f} B/access row "
            f"({r[f'{name}_accesses_rows']} rows), {r[f'{name}_events_bytes_per_row']:5.1f} B/event "
            f"({r[f'{name}_events_rows']} events)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
