"""Instructions the recorder adds per operation, counted by valgrind's callgrind.

    python tools/bench_record_instructions.py                    # every operation, 2,000 each
    python tools/bench_record_instructions.py zero_ numpy --ops 4000

``tape_cycle`` is an empty tape created, entered and exited; ``backward`` the backward of a
tape of 4 launches ending in a loss; ``sgd`` a ``warp.optim.SGD`` step over 3 parameters;
``step_b`` one step of ``bench_record.py``'s toy training loop (b). ``launch_generic``
launches a kernel with ``dtype=Any`` arguments (Warp picks the overload per call, as for
``warp.optim``'s kernels). ``tape_zero`` is one ``Tape.zero()`` of a tape holding 17
gradients; ``from_numpy`` one ``wp.array(ndarray, requires_grad=True)`` of 16 floats (a
staging array over the host memory, a copy from it, the array's gradient); ``loop`` one iteration of ``bench_record.py``'s allocation-heavy loop (e) with 10
steps (12 allocations with their gradients, 11 launches, backward, two value reads, a new
parameter array, ``Tape.zero()``): run them with fewer ``--ops``.

A measure that machine load does not move: on the shared 2-core machine the timings of
``tools/bench_record.py`` (d) swing by 1-2 µs per operation from run to run, which is the
size of the differences a recorder change makes. Machine load does not move instruction
counts; the process's own state does a little (hash seeds, dict layouts): the "added" column
of one build moves by 1-4% from run to run, so judge a change larger than that in one run
each way, and a smaller one over a few runs.

Each (operation, mode) runs in a process of its own under ``valgrind --tool=callgrind
--collect-atstart=no --toggle-collect=builtin_sorted``: the N operations are the key
function of one ``sorted(range(N), key=op)`` call, and only that call is counted (not the
imports, the warm-up, ``start()``/``stop()``), with the garbage collector off: whether a
collection falls inside a run's window is chance (one took 54 M instructions in a run of 300
steps of (b), half of what the recorder adds to them), so the counts leave it out; the recorder's share of collections shows
in the timings of ``bench_record.py``. ``plain`` is Warp alone; ``traced`` runs
under ``warptrace.start()`` with the flushes held off (the writer's work is measured by
``bench_record.py``; here only what the program's own thread pays per operation). Each
run takes 20-60 s (valgrind runs everything 20-50x slower; the counted part is small).

Reported per operation: instructions per operation plain and traced, the difference, and
the ratio. On this machine Python code runs at about 10,000 instructions per µs (an
``array.zero_()`` is ~14,000 instructions and ~1.3 µs plain), so 1,000 added instructions
is about 0.1 µs. Needs ``valgrind`` on the PATH; exit status 2 without it.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

OPERATIONS = (
    "launch", "launch_generic", "launch_taped", "zeros", "zero_", "fill_", "copy", "numpy", "tape_zero",
    "tape_cycle", "backward", "sgd", "step_b", "loop", "from_numpy",
)  # fmt: skip

# The program each run executes: argv = mode, operation, N.
PROBE = r"""
import gc
import sys
from typing import Any

import numpy as np
import warp as wp
import warp.optim

wp.config.quiet = True
wp.init()
mode, operation, n = sys.argv[1], sys.argv[2], int(sys.argv[3])


@wp.kernel
def tiny(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * 2.0


a = wp.array(np.ones(16, dtype=np.float32), requires_grad=True, device="cpu")
b = wp.zeros(16, requires_grad=True, device="cpu")
tape = wp.Tape()


def launch(i):
    wp.launch(tiny, dim=16, inputs=[a], outputs=[b], device="cpu")
    return i


@wp.kernel
def tiny_generic(x: wp.array(dtype=Any), y: wp.array(dtype=Any)):
    i = wp.tid()
    y[i] = x[i] * x.dtype(2.0)


def launch_generic(i):
    # a generic kernel, as Warp's optimizers launch theirs: Warp picks the overload per call
    wp.launch(tiny_generic, dim=16, inputs=[a], outputs=[b], device="cpu")
    return i


def launch_taped(i):
    with tape:
        wp.launch(tiny, dim=16, inputs=[a], outputs=[b], device="cpu")
    return i


def zeros(i):
    wp.zeros(16, dtype=float, requires_grad=True, device="cpu")
    return i


def zero_(i):
    a.zero_()
    return i


def fill_(i):
    a.fill_(2.0)
    return i


def copy(i):
    wp.copy(b, a)
    return i


def numpy(i):
    a.numpy()
    return i


# a tape holding 17 gradients (a chain of 16 launches): one operation is Tape.zero()
chain = [wp.zeros(16, dtype=float, requires_grad=True, device="cpu") for _ in range(17)]
chain_tape = wp.Tape()
with chain_tape:
    for k in range(16):
        wp.launch(tiny, dim=16, inputs=[chain[k]], outputs=[chain[k + 1]], device="cpu")
chain_tape.backward(grads={chain[16]: wp.ones(16, dtype=float, device="cpu")})


def tape_zero(i):
    chain_tape.zero()
    return i


@wp.kernel
def integrate(x: wp.array(dtype=float), p: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] + 0.01 * wp.sin(p[i] * x[i])


@wp.kernel
def loss_kernel(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, (y[i] - 1.0) * (y[i] - 1.0))


def tape_cycle(i):
    # an empty tape: created, entered, exited
    t = wp.Tape()
    with t:
        pass
    return i


@wp.kernel
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, x[wp.tid()])


# a tape of 4 launches ending in a loss: one operation is its backward (the seed, 4 adjoint
# launches)
four = [wp.zeros(16, dtype=float, requires_grad=True, device="cpu") for _ in range(4)]
four_loss = wp.zeros(1, dtype=float, requires_grad=True, device="cpu")
four_tape = wp.Tape()
with four_tape:
    for k in range(3):
        wp.launch(tiny, dim=16, inputs=[four[k]], outputs=[four[k + 1]], device="cpu")
    wp.launch(total, dim=16, inputs=[four[3]], outputs=[four_loss], device="cpu")


def backward(i):
    four_tape.backward(four_loss)
    return i


weights = [wp.zeros(64, dtype=float, requires_grad=True, device="cpu") for _ in range(3)]
sgd_optimizer = warp.optim.SGD(weights, lr=1e-3)


def sgd(i):
    # warp.optim.SGD.step over three parameters (a generic kernel launched per parameter)
    sgd_optimizer.step([w.grad for w in weights])
    return i


@wp.kernel
def layer(x: wp.array(dtype=float), w: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.tanh(w[i] * x[i] + 0.1)


@wp.kernel
def step_loss(y: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


b_x0 = wp.array(np.linspace(-1.0, 1.0, 64, dtype=np.float32), device="cpu")
b_target = wp.zeros(64, dtype=float, device="cpu")
b_hidden = [wp.zeros(64, dtype=float, requires_grad=True, device="cpu") for _ in range(3)]
b_staged = wp.zeros(64, dtype=float, requires_grad=True, device="cpu")
b_loss = wp.zeros(1, dtype=float, requires_grad=True, device="cpu")


def step_b(i):
    # one step of bench_record.py's toy training loop (b): 3 layers, copy, loss, backward, SGD
    t = wp.Tape()
    with t:
        source = b_x0
        for w, h in zip(weights, b_hidden):
            wp.launch(layer, dim=64, inputs=[source, w], outputs=[h], device="cpu")
            source = h
        wp.copy(b_staged, source)
        b_loss.zero_()
        wp.launch(step_loss, dim=64, inputs=[b_staged, b_target], outputs=[b_loss], device="cpu")
    t.backward(b_loss)
    sgd_optimizer.step([w.grad for w in weights])
    t.zero()
    return i


loop_p = [wp.array(np.full(16, 0.5, dtype=np.float32), requires_grad=True, device="cpu")]


def loop(i):
    # one iteration of bench_record.py's allocation-heavy loop (e), with 10 steps
    p = loop_p[0]
    states = [wp.zeros(16, dtype=float, requires_grad=True, device="cpu") for _ in range(11)]
    states[0].fill_(1.0)
    lval = wp.zeros(1, dtype=float, requires_grad=True, device="cpu")
    t = wp.Tape()
    with t:
        for k in range(10):
            wp.launch(integrate, dim=16, inputs=[states[k], p], outputs=[states[k + 1]], device="cpu")
        wp.launch(loss_kernel, dim=16, inputs=[states[10]], outputs=[lval], device="cpu")
    t.backward(lval)
    g = p.grad.numpy()
    loop_p[0] = wp.array(p.numpy() - 1e-3 * g, requires_grad=True, device="cpu")
    t.zero()
    return i


host16 = np.linspace(0.0, 1.0, 16, dtype=np.float32)


def from_numpy(i):
    # an array uploaded from NumPy with a gradient (a parameter rebuilt every iteration)
    wp.array(host16, requires_grad=True, device="cpu")
    return i


op = globals()[operation]
if mode == "traced":
    import warptrace
    from warptrace.record import session, state

    session.FLUSH_SECONDS = 1e6  # the writer thread's idle flush: never, while counting
    warptrace.start(sys.argv[4])
    rec = state.rec
    rec.flush_ev_len = rec.flush_acc_len = 1 << 60
    rec.flush_deadline = 1 << 62
for i in range(200):  # warm-up: kernels loaded, call sites and arrays registered
    op(i)
tape.reset()
gc.collect()
gc.disable()  # a collection lands in one run's window and not the other's: counts apart from it
sorted(range(n), key=op)
gc.enable()
if mode == "traced":
    warptrace.stop()
"""


def count(python: str, mode: str, operation: str, n: int, folder: Path) -> int:
    """Instructions callgrind counted inside the ``sorted`` call of one run."""
    probe = folder / "probe.py"
    probe.write_text(PROBE)
    out = folder / f"callgrind.{mode}.{operation}.out"
    argv = [
        "valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=builtin_sorted",
        f"--callgrind-out-file={out}", python, str(probe), mode, operation, str(n), str(folder / "run.wtrace"),
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, cwd=folder, check=False)
    for line in done.stderr.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1].strip())
    raise RuntimeError(
        f"{mode} {operation}: no count from callgrind (exit {done.returncode}):\n{done.stderr[-2000:]}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("operations", nargs="*", help=f"any of {', '.join(OPERATIONS)} (default: all)")
    parser.add_argument("--ops", type=int, default=2000, help="operations counted per run (default 2000)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter with warp and warptrace")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("bench_record_instructions: valgrind is not installed", file=sys.stderr)
        return 2
    operations = args.operations or list(OPERATIONS)
    unknown = [o for o in operations if o not in OPERATIONS]
    if unknown:
        parser.error(f"unknown operation {unknown[0]!r} (choose from {', '.join(OPERATIONS)})")
    print(
        f"{'operation':14} {'plain':>10} {'traced':>10} {'added':>10} {'ratio':>6}  (instructions per operation)"
    )
    with tempfile.TemporaryDirectory(prefix="wt-instr-") as tmp:
        folder = Path(tmp)
        for operation in operations:
            plain = count(args.python, "plain", operation, args.ops, folder) / args.ops
            traced = count(args.python, "traced", operation, args.ops, folder) / args.ops
            print(
                f"{operation:14} {plain:10.0f} {traced:10.0f} {traced - plain:10.0f} {traced / plain:6.2f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
