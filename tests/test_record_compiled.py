"""The optional compiled ``wp.launch`` wrapper (warptrace/record/_fastlaunch.c).

Where it is built, ``wp.launch`` is a ``FastLaunch`` object while tracing; with
``WARPTRACE_PURE_PYTHON=1`` (or without the build) it is the Python closure of
:func:`warptrace.record.wrap.launch.make_launch`. Both must record the same rows: the
zoo programs below are recorded both ways, each in its own process, and every table
is compared row by row (times and device pointers aside). The other recorder tests
run with whichever path the environment selects (CI runs them both ways).
"""

from __future__ import annotations

import os
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

wp = pytest.importorskip("warp")

import warptrace  # noqa: E402
from tests.test_record_common import DEVICE  # noqa: E402
from warptrace.record import compiled as compiled_mod  # noqa: E402
from warptrace.record import state  # noqa: E402
from warptrace.record.wrap import launch as launch_mod  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
COMPILED = launch_mod.compiled_launch_type()
COMPILED_ZERO = compiled_mod.compiled_piece("FastZero")
COMPILED_READ = compiled_mod.compiled_piece("FastRead")
needs_compiled = pytest.mark.skipif(
    COMPILED is None, reason="the compiled launch wrapper is not built here (or WARPTRACE_PURE_PYTHON is set)"
)

# tapes and backward (adjoint launches), struct fields (nested too), optimizers (Warp's
# own launches), generic kernels, a program split over modules; memsets (FastZero):
# zero_ outside and inside tapes, Tape.zero() batches, a graph captured on the CPU;
# value reads (FastRead);
# allocations, views, ptr aliases and copies (FastInitNew, FastRegister, the frame walk)
PROGRAMS = (
    "ok_flow_multi_head",
    "ok_mem_struct_accumulate",
    "wt104_nested_struct",
    "ok_mem_optimizer",
    "wt407_generic",
    "wt306_optim/wt306_optim_main",
    "wt101_zero_force",
    "wt103_memset",
    "wt203_train_loop_fixed",
    "ok_flow_microbatch",
    "wt306_delayed",
    "ok_flow_capture_replay",
    "ok_mem_inplace_slice",
    "wt103_ptr_alias",
    "ok_flow_checkpoint_saved_adjoint",
    # value reads (FastRead): host round trips linked by digest, reads in loops and on tapes
    "wt309_numpy_round_trip",
    "wt303_host_checkpoint",
    "ok_flow_host_logging",
    # library frames (a package under site-packages/): sites paired with the library line
    "wt101_lib_solver",
    # arrays behind a wp.Mesh id (the compiled launch hands those plans to Python), Mesh.refit
    "wt301_mesh_points",
)
_SKIP_COLUMNS = {"t_ns", "ptr"}  # wall-clock times; device addresses differ between processes


@pytest.fixture
def tracing(tmp_path):
    warptrace.start(tmp_path / "run.wtrace")
    yield
    warptrace.stop()


@wp.kernel
def _scale(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * 2.0


@needs_compiled
def test_compiled_wrapper_records_the_launches(tracing):
    assert isinstance(wp.launch, COMPILED)
    x = wp.ones(4, dtype=float, device=DEVICE)
    y = wp.zeros(4, dtype=float, device=DEVICE)
    before = wp.launch.recorded_calls
    wp.launch(_scale, dim=4, inputs=[x], outputs=[y], device=DEVICE)
    wp.launch(_scale, 4, [x], [y], device=DEVICE)
    assert wp.launch.recorded_calls == before + 2
    assert y.numpy().tolist() == [2.0] * 4


@needs_compiled
def test_compiled_wrapper_passes_bad_calls_to_warp(tracing):
    # an unknown keyword or a missing argument is Warp's error, unchanged
    original = wp.launch.__warptrace_original__
    with pytest.raises(TypeError) as ours:
        wp.launch(_scale, dim=4, bogus=1)
    with pytest.raises(TypeError) as warps:
        original(_scale, dim=4, bogus=1)
    assert str(ours.value) == str(warps.value)
    with pytest.raises(TypeError):
        wp.launch(_scale)


@wp.kernel
def _scale_any(x: wp.array(dtype=Any), y: wp.array(dtype=Any)):
    i = wp.tid()
    y[i] = x[i] * x.dtype(2.0)


def test_generic_kernel_launches_name_their_overload(tracing):
    # the plan of a generic kernel is per overload (the argument types Warp infers it from):
    # the compiled wrapper finds a known one itself, a new one through plan_for
    from warptrace.trace.rows import EVENT_ROW, EVENT_WIDTH
    from warptrace.trace.schema import EVENT_KIND_CODES, LAUNCH

    rec = state.rec
    rec.flush_ev_len = rec.flush_acc_len = 1 << 60  # every row stays in the buffers
    first = rec.seq
    calls = [
        (dtype, wp.ones(4, dtype=dtype, device=DEVICE)) for dtype in (wp.float32, wp.float64, wp.float32)
    ]
    for dtype, x in calls:
        wp.launch(
            _scale_any, dim=4, inputs=[x], outputs=[wp.zeros(4, dtype=dtype, device=DEVICE)], device=DEVICE
        )
        wp.launch(_scale_any, 4, (x,), [wp.zeros(4, dtype=dtype, device=DEVICE)], device=DEVICE)
    kind, kernel = EVENT_ROW.index("kind"), EVENT_ROW.index("kernel")
    ev = rec.ev
    rows = [ev[i : i + EVENT_WIDTH] for i in range(0, len(ev), EVENT_WIDTH)]
    kernels = [r[kernel] for r in rows if r[0] >= first and r[kind] == EVENT_KIND_CODES[LAUNCH]]
    assert len(kernels) == 6
    assert kernels[0] == kernels[1] == kernels[4] == kernels[5]
    assert kernels[2] == kernels[3] != kernels[0]
    assert {key[0] for key in state.generic_plans} == {_scale_any}
    assert len(state.generic_plans) == 2
    if COMPILED is not None and isinstance(wp.launch, COMPILED):  # a known overload: no plan_for call
        from warptrace.record.wrap.plans import plan_for

        planned = []
        x64 = calls[1][1]

        def profile(frame, event, arg):
            if event == "call" and frame.f_code is plan_for.__code__:
                planned.append(frame.f_code)

        sys.setprofile(profile)
        try:
            wp.launch(_scale_any, dim=4, inputs=[x64], outputs=[wp.zeros(4, dtype=wp.float64, device=DEVICE)])
        finally:
            sys.setprofile(None)
        assert planned == []


@wp.kernel
def _double_into(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * 2.0


def _memsets(rec, first):
    """(array_id, tape) of the MEMSET rows after seq ``first`` (in the buffers, unflushed)."""
    from warptrace.trace.rows import ACCESS_WIDTH, EVENT_WIDTH
    from warptrace.trace.schema import EVENT_KIND_CODES, MEMSET

    ev, acc = rec.ev, rec.acc
    rows = [ev[i : i + EVENT_WIDTH] for i in range(0, len(ev), EVENT_WIDTH)]
    written = {acc[i]: acc[i + 1] for i in range(0, len(acc), ACCESS_WIDTH)}
    return [(written[r[0]], r[2]) for r in rows if r[0] >= first and r[1] == EVENT_KIND_CODES[MEMSET]]


@needs_compiled
def test_compiled_zero_decides_the_common_cases_itself(tracing):
    from warptrace.record import state

    assert COMPILED_ZERO is not None and isinstance(wp.array.zero_, COMPILED_ZERO)
    rec = state.rec
    rec.flush_ev_len = rec.flush_acc_len = 1 << 60  # every row stays in the buffers
    zero = wp.array.zero_
    x = wp.ones(4, dtype=float, requires_grad=True, device=DEVICE)
    y = wp.zeros(4, dtype=float, requires_grad=True, device=DEVICE)

    def calls(action):
        before = zero.recorded_calls
        action()
        return zero.recorded_calls - before

    def zero_y():
        y.zero_()

    wp.launch(_double_into, 4, [x], [y], device=DEVICE)  # y is no fresh allocation now
    first = rec.seq
    # a call site seen for the first time is found by the frame walk, then by its position
    assert [calls(zero_y) for _ in range(3)] == [1, 1, 1]
    ids = {row[0] for row in _memsets(rec, first)}
    assert len(_memsets(rec, first)) == 3 and len(ids) == 1
    # the initialisation of a fresh allocation is no event
    first = rec.seq
    fresh = wp.empty(4, dtype=float, device=DEVICE)
    assert calls(fresh.zero_) == 1 and _memsets(rec, first) == []
    # inside a tape: the tape's id; Tape.zero(): its gradients, batched (no Python wrapper)
    tape = wp.Tape()
    with tape:
        wp.launch(_double_into, 4, [x], [y], device=DEVICE)
        calls(zero_y)  # the site inside the tape
        first = rec.seq
        assert calls(zero_y) == 1
    tape_id = tape._warptrace_tape[1]
    assert [t for _, t in _memsets(rec, first)] == [tape_id]
    tape.backward(grads={y: wp.ones(4, dtype=float, device=DEVICE)})
    first = rec.seq
    assert calls(tape.zero) == 2  # x.grad and y.grad
    assert [t for _, t in _memsets(rec, first)] == [tape_id, tape_id]
    assert x.grad.numpy().tolist() == [0.0] * 4 and y.grad.numpy().tolist() == [0.0] * 4
    # bound, unbound and by keyword go the same way
    y.fill_(3.0)
    wp.array.zero_(y)
    assert y.numpy().tolist() == [0.0] * 4
    assert rec.error_count == 0


def test_zero_of_an_array_seen_first_is_recorded(tmp_path):
    # both paths: an array the recorder has not registered yet gets its row
    from warptrace.record import state

    made_before = wp.full(4, 2.0, dtype=float, device=DEVICE)
    warptrace.start(tmp_path / "run.wtrace")
    try:
        rec = state.rec
        rec.flush_ev_len = rec.flush_acc_len = 1 << 60
        first = rec.seq
        for _ in range(2):
            made_before.zero_()
        assert len(_memsets(rec, first)) == 2 and rec.error_count == 0
    finally:
        warptrace.stop()
    assert made_before.numpy().tolist() == [0.0] * 4


def test_a_recorder_error_never_reaches_the_program(tmp_path, monkeypatch):
    # both paths: an exception while recording goes to rec.fail (logged), the launch runs
    from warptrace.record import identity, session, state

    def broken(self, arr, *args, **kwargs):
        raise RuntimeError("register failed")

    monkeypatch.setattr(session, "STRICT", False)
    monkeypatch.setattr(identity.Identity, "register", broken)
    x = wp.ones(4, dtype=float, device=DEVICE)
    y = wp.zeros(4, dtype=float, device=DEVICE)
    warptrace.start(tmp_path / "run.wtrace")
    try:
        rec = state.rec
        assert rec is not None
        wp.launch(_scale, dim=4, inputs=[x], outputs=[y], device=DEVICE)
        assert rec.error_count >= 1 and "register failed" in rec.errors[-1]
    finally:
        warptrace.stop()
    assert y.numpy().tolist() == [2.0] * 4


def test_pure_python_env_var_selects_the_closure(monkeypatch):
    monkeypatch.setenv(compiled_mod.PURE_PYTHON_ENV, "1")
    assert launch_mod.compiled_launch_type() is None
    original = wp.launch
    wrapper = launch_mod.make_launch(original)
    assert isinstance(wrapper, types.FunctionType)
    assert wrapper.__wrapped__ is original


def _record(out: Path, pure: bool) -> None:
    env = dict(os.environ)
    env.pop(compiled_mod.PURE_PYTHON_ENV, None)
    if pure:
        env[compiled_mod.PURE_PYTHON_ENV] = "1"
    subprocess.run(
        [sys.executable, "-c", "import sys; from tests.test_record_compiled import _record_main; "
         "_record_main(sys.argv[1], sys.argv[2:])", str(out), *PROGRAMS],
        cwd=ROOT, env=env, check=True, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def _record_main(out: str, names: list[str]) -> None:
    """(In the child process.) Record the named zoo programs into ``out``, one trace each."""
    import warptrace
    from tests.zoo import discover, load

    wp.config.quiet = True
    kind = "pure" if launch_mod.compiled_launch_type() is None else "compiled"
    (Path(out) / "kind").write_text(kind)
    for program in discover():
        if program.name not in names or program.skip_reason():
            continue
        flat = program.name.replace("/", "__")
        module = load(program, module_name="zoo_compiled_" + flat)
        warptrace.start(Path(out) / f"{flat}.wtrace", numerics=program.numerics)
        try:
            module.run()
        finally:
            warptrace.stop()


@needs_compiled
def test_compiled_and_pure_paths_record_identical_rows(tmp_path):

    pure, compiled = tmp_path / "pure", tmp_path / "compiled"
    pure.mkdir()
    compiled.mkdir()
    _record(pure, pure=True)
    _record(compiled, pure=False)
    assert (pure / "kind").read_text() == "pure" and (compiled / "kind").read_text() == "compiled"
    from tests.zoo import discover

    # the programs this Warp runs (a program may need a newer one: its skip_reason)
    runnable = [p for p in discover() if p.name in PROGRAMS and not p.skip_reason()]
    traces = sorted(p.name for p in pure.glob("*.wtrace"))
    assert traces == sorted(p.name for p in compiled.glob("*.wtrace")) and len(traces) == len(runnable)
    for name in traces:
        _assert_same_tables(pure / name, compiled / name)


def _assert_same_tables(pure: Path, compiled: Path) -> None:
    """The two traces hold the same rows in every table (times and device pointers aside)."""
    from warptrace.trace.reader import read_trace

    a, b = read_trace(pure), read_trace(compiled)
    assert sorted(a.tables) == sorted(b.tables)
    assert a.tables["events"].num_rows > 0
    for table in a.tables:
        x, y = a.tables[table], b.tables[table]
        columns = [c for c in x.column_names if c not in _SKIP_COLUMNS]
        rows_a, rows_b = x.select(columns).to_pylist(), y.select(columns).to_pylist()
        first = next((i for i, (r, s) in enumerate(zip(rows_a, rows_b)) if r != s), None)
        shown = slice(first or 0, (first or 0) + 1)
        assert (len(rows_a), first) == (len(rows_b), None), (pure.name, table, rows_a[shown], rows_b[shown])


# the kernel of the scripts below
_SCALE = """
@wp.kernel
def scale(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * 2.0
"""

# Copies and value reads in the forms the compiled FastCopy and FastRead take (and the ones
# they leave to Python): each line runs three times, so that its call site is known.
_COPIES_AND_READS = (
    """
import numpy as np
import warp as wp

wp.config.quiet = True
"""
    + _SCALE
    + """


a = wp.array(np.arange(16, dtype=np.float32), requires_grad=True, device="cpu")
b = wp.zeros(16, dtype=float, requires_grad=True, device="cpu")
c = wp.zeros(16, dtype=float, device="cpu")
m = wp.array(np.arange(12, dtype=np.float32).reshape(3, 4), device="cpu")
small = wp.zeros(4, dtype=float, device="cpu")
for _ in range(3):
    wp.copy(b, a)  # and the copy of the gradients inside it
    wp.copy(dest=c, src=a)
    wp.copy(c, a, count=16)
    wp.copy(c, a, dest_offset=2, src_offset=1, count=4)
    x = wp.array(np.ones(16, dtype=np.float32), requires_grad=True, device="cpu")  # from host memory
    b.assign(a)
    c.assign(np.full(16, 3.0, dtype=np.float32))
    d = wp.clone(a)
    for dest, count in ((c, -1), (small, 0)):  # Warp raises: no event, the seq given back
        try:
            wp.copy(dest, a, count=count)
        except RuntimeError:
            pass
    a.numpy()
    m[:, 1].numpy()
    b.list()
    np.asarray(c)  # the program hands the memory out itself: its bridge event (the interface getter)
    c.fill_(2.5)  # fill_ (FastFill): a float, an int, others (the Python wrapper's)
    c.fill_(3)
    c.fill_(np.float32(1.5))
    c.fill_(True)
    wp.zeros(4, dtype=float, device="cpu").fill_(1.0)  # a fresh allocation's initialisation
tape = wp.Tape()
with tape:
    for _ in range(3):
        wp.copy(b, a)
        wp.launch(scale, 16, [b], [c], device="cpu")
        b.numpy()
        c.fill_(0.5)
tape.backward(grads={c: wp.ones(16, dtype=float, device="cpu")})
print(
    "compiled calls",
    *(getattr(f, "recorded_calls", 0) for f in (wp.copy, wp.array.numpy, wp.array.fill_)),
)
from warptrace.record import state

print("open seqs", len(state.rec.open_seqs), "errors", state.rec.error_count)
"""
)


def _both_ways(tmp_path: Path, text: str, argv: tuple[str, ...]) -> list[int]:
    """Run the script ``text`` with and without the compiled module (``argv``: how, the trace
    path given as ``{out}``), check both recorded the same rows without an error, and return
    the compiled run's "compiled calls" counts (the pure run's are all 0)."""
    script = tmp_path / "script.py"
    script.write_text(text)
    printed = {}
    for kind in ("pure", "compiled"):
        env = dict(os.environ)
        env.pop(compiled_mod.PURE_PYTHON_ENV, None)
        if kind == "pure":
            env[compiled_mod.PURE_PYTHON_ENV] = "1"
        out = str(tmp_path / f"{kind}.wtrace")
        done = subprocess.run(
            [sys.executable, *(arg.format(out=out, script=script) for arg in argv)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        printed[kind] = [line for line in done.stdout.splitlines() if line.startswith("compiled calls")]
        assert "open seqs 0 errors 0" in done.stdout, done.stdout[-2000:]
    counts = [int(v) for v in printed["compiled"][0].split()[2:]]
    assert printed["pure"] == ["compiled calls" + " 0" * len(counts)]
    _assert_same_tables(tmp_path / "pure.wtrace", tmp_path / "compiled.wtrace")
    return counts


@needs_compiled
def test_compiled_copies_reads_and_fills_record_the_rows_of_the_python_wrappers(tmp_path):
    argv = ("-m", "warptrace", "-q", "--no-analyze", "-o", "{out}", "{script}")
    copies, reads, fills = _both_ways(tmp_path, _COPIES_AND_READS, argv)
    # the known sites' copies and their gradients, the reads, the fills (and fresh ones)
    assert copies >= 20 and reads >= 6 and fills >= 6
    from warptrace.trace.reader import read_trace
    from warptrace.trace.schema import BRIDGE

    events = read_trace(tmp_path / "compiled.wtrace").tables["events"].to_pylist()
    assert sum(e["kind"] == BRIDGE for e in events) == 3  # np.asarray(c); not numpy()'s own


# Tapes in the forms the compiled FastTapeInit and FastTapeEvent take, and the ones they
# leave to Python: a tape made before start(), a thread's first event.
_TAPES = (
    """
import sys
import threading

import numpy as np
import warp as wp

import warptrace

wp.config.quiet = True
"""
    + _SCALE
    + """


early = wp.Tape()  # made before start(): its id and TAPE_CREATE come with its first event
warptrace.start(sys.argv[1])
a = wp.array(np.arange(16, dtype=np.float32), requires_grad=True, device="cpu")
b = wp.zeros(16, dtype=float, requires_grad=True, device="cpu")
for _ in range(3):
    with early:
        wp.launch(scale, 16, [a], [b], device="cpu")
    tape = wp.Tape()
    with tape:
        try:
            wp.Tape().__enter__()  # Warp refuses a second active tape: its error, no event
        except RuntimeError:
            pass
        wp.launch(scale, 16, [a], [b], device="cpu")
    tape.backward(grads={b: wp.ones(16, dtype=float, device="cpu")})
    tape.__enter__()
    tape.__exit__(None, None, None)
    try:
        with tape:
            raise KeyError("inside the tape")
    except KeyError:
        pass
    tape.zero()


@wp.kernel
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, x[wp.tid()])


loss = wp.zeros(1, dtype=float, requires_grad=True, device="cpu")
staged = wp.zeros(16, dtype=float, requires_grad=True, device="cpu")


def noop():
    pass


for _ in range(3):  # backward in every form (FastBackward: no grads, no keywords)
    taped = wp.Tape()
    with taped:
        wp.launch(scale, 16, [a], [b], device="cpu")
        wp.launch(total, 16, [b], [loss], device="cpu")
    taped.backward(loss)
    taped.backward(loss=loss)
    taped.backward()
    try:
        taped.backward(b)  # not a scalar: Warp raises, the rows still close the backward
    except RuntimeError:
        pass
    inner = wp.Tape()
    with inner:
        wp.launch(total, 16, [b], [loss], device="cpu")
    outer = wp.Tape()
    with outer:
        wp.launch(scale, 16, [a], [b], device="cpu")
        outer.record_func(backward=lambda: inner.backward(loss), arrays=[b, loss])  # a backward in a backward
        outer.record_func(noop, [a, wp.zeros(2, dtype=float, requires_grad=True, device="cpu")])  # positional
        try:
            outer.record_func(noop, ["not an array"])  # Warp raises: its error, no event
        except RuntimeError:
            pass
        wp.copy(staged, b)  # Warp's own record_func, inside the copy
    outer.backward(loss)
    for t in (taped, inner, outer):
        t.zero()
    outer.reset()
    wp.Tape().zero()  # nothing to zero


def worker():
    t = wp.Tape()  # the thread's first event: Python makes its state
    with t:
        wp.launch(scale, 16, [a], [b], device="cpu")


thread = threading.Thread(target=worker)
thread.start()
thread.join()
methods = (wp.Tape.__init__, wp.Tape.__enter__, wp.Tape.__exit__, wp.Tape.backward, wp.Tape.record_func)
print("compiled calls", *(getattr(f, "recorded_calls", 0) for f in methods))
from warptrace.record import state

print("open seqs", len(state.rec.open_seqs), "errors", state.rec.error_count)
warptrace.stop()
"""
)


@needs_compiled
def test_compiled_tape_events_record_the_rows_of_the_python_wrappers(tmp_path):
    created, entered, exited, backward, funcs = _both_ways(tmp_path, _TAPES, ("{script}", "{out}"))
    # the tapes made on the main thread; every enter and exit but the early tape's first; every
    # backward without grads or keywords; the functions recorded once their names are quoted
    # (the first of each name is Python's)
    assert created == 18 and entered >= 19 and exited >= 19 and backward == 15 and funcs >= 6


# Gradients allocated in the forms the compiled FastAllocGrad takes (Warp's _alloc_grad from
# zeros/empty/array/clone with requires_grad, the requires_grad setter, a grad made on a thread
# of its own) and the one it hands to the Python wrapper's second half (an array registered
# before its grad existed: wp.array(data, requires_grad=True) copies its data first).
_GRADS = (
    """
import sys
import threading

import numpy as np
import warp as wp

import warptrace

wp.config.quiet = True
"""
    + _SCALE
    + """

warptrace.start(sys.argv[1])


def grads():
    kept = []
    for _ in range(3):
        a = wp.zeros(16, dtype=float, requires_grad=True, device="cpu")
        b = wp.array(np.arange(16, dtype=np.float32), requires_grad=True, device="cpu")
        c = wp.empty(16, dtype=float, device="cpu")
        wp.launch(scale, 16, [a], [c], device="cpu")
        c.requires_grad = True  # the setter: registered before its grad, reported by the setter
        d = wp.clone(b, requires_grad=True)
        e = wp.zeros(16, dtype=float, device="cpu")
        e.numpy()  # registered first
        e.requires_grad = True
        with wp.Tape() as tape:
            wp.launch(scale, 16, [a], [d], device="cpu")
            f = wp.array(np.ones(16, dtype=np.float32), requires_grad=True, device="cpu")  # on the tape
        tape.backward(grads={d: wp.ones(16, dtype=float, device="cpu")})
        kept.append((a.grad.numpy().sum(), b.grad, c.grad, d.grad, e.grad, f.grad))
    return kept


grads()
thread = threading.Thread(target=grads)  # a thread's first grad: its state made in Python
thread.start()
thread.join()
print("compiled calls", getattr(wp.array._alloc_grad, "recorded_calls", 0))
from warptrace.record import state

print("open seqs", len(state.rec.open_seqs), "errors", state.rec.error_count)
warptrace.stop()
"""
)


@needs_compiled
def test_compiled_grad_allocation_records_the_rows_of_the_python_wrapper(tmp_path):
    (decided,) = _both_ways(tmp_path, _GRADS, ("{script}", "{out}"))
    # every grad allocation on both threads, 3 times: a and d have no row; b and f, registered
    # first, get their SET_REQUIRES_GRAD rows from the compiled path; c and e's come from the setter
    assert decided == 36
    from warptrace.trace.reader import read_trace

    events = read_trace(tmp_path / "compiled.wtrace").tables["events"].to_pylist()
    rows = [e for e in events if e["kind"] == "set_requires_grad"]
    assert len(rows) == 24  # b, c, e and f, 3 times on both threads
    assert sum(e["tape"] >= 0 for e in rows) == 6  # f's


# Views in the forms the compiled FastInitFromPtr and FastRegister take (a slice of a
# registered array in live memory, with its grad; a view of a view; 2-D windows; the windows
# Warp's backward of an offset copy makes) and the ones they leave to Python: a view of an
# array made before start() or not registered yet, a ptr alias, zero-copy numpy memory, a
# thread's first view. Each line runs three times, so that its call site is known.
_VIEWS = (
    """
import sys
import threading

import numpy as np
import warp as wp

import warptrace

wp.config.quiet = True
"""
    + _SCALE
    + """

before = wp.zeros(32, dtype=float, device="cpu")
warptrace.start(sys.argv[1])


def views():
    kept = []
    for _ in range(3):
        a = wp.zeros(32, dtype=float, requires_grad=True, device="cpu")
        b = wp.zeros(16, dtype=float, requires_grad=True, device="cpu")
        wp.launch(scale, 16, [a[0:16]], [b], device="cpu")  # a registered first: its view in C
        half = a[16:32]
        quarter = half[4:8]  # a view of a view
        wp.launch(scale, 4, [quarter], [b[0:4]], device="cpu")
        m = wp.zeros((6, 8), dtype=float, device="cpu")
        m.numpy()
        window = m[1:4, 2:6]  # strided, not contiguous
        window.numpy()
        fresh = wp.zeros(8, dtype=float, device="cpu")
        unseen = fresh[2:6]  # its base not registered yet: the Python method
        unseen.numpy()
        before[0:8].numpy()  # a base made before start()
        alias = wp.array(ptr=a.ptr, dtype=float, shape=(8,), device="cpu")  # an alias, no base
        alias.numpy()
        host = np.arange(16, dtype=np.float32)
        wp.array(host, dtype=float, device="cpu", copy=False)[2:6].numpy()  # zero-copy memory
        with wp.Tape() as tape:
            wp.copy(b, a, dest_offset=2, src_offset=4, count=8)  # backward: windows of the grads
        tape.backward(grads={b: wp.ones(16, dtype=float, device="cpu")})
        kept.append((a.grad.numpy().sum(), half, quarter, window))
    return kept


views()
thread = threading.Thread(target=views)  # a thread's first view: its state made in Python
thread.start()
thread.join()
from warptrace.record import state

print(
    "compiled calls",
    getattr(wp.array._init_from_ptr, "recorded_calls", 0),
    getattr(state.rec.ident.register, "registered", 0),
)
print("open seqs", len(state.rec.open_seqs), "errors", state.rec.error_count)
warptrace.stop()
"""
)


@needs_compiled
def test_compiled_views_record_the_rows_of_the_python_wrappers(tmp_path):
    made, registered = _both_ways(tmp_path, _VIEWS, ("{script}", "{out}"))
    assert made >= 30 and registered >= 30
    from warptrace.trace.reader import read_trace

    arrays = read_trace(tmp_path / "compiled.wtrace").tables["arrays"].to_pylist()
    kinds = {a["kind"] for a in arrays}
    assert {"view", "owned", "grad", "ptr_alias", "external"} <= kinds, kinds
    views = [a for a in arrays if a["kind"] == "view"]
    assert all(a["base_id"] >= 0 and a["alloc_id"] >= 0 for a in views)
    assert any(a["offset"] > 0 and a["strides"][0] != a["itemsize"] * a["shape"][-1] for a in views)


def test_a_kept_wrapper_lets_the_stopped_session_go(tmp_path):
    # both paths: stop() leaves nothing of the session in a wrapper the program kept,
    # before and after the wrapper's next call
    import gc
    import weakref

    from warptrace.record import state

    x = wp.ones(4, dtype=float, device=DEVICE)
    y = wp.zeros(4, dtype=float, device=DEVICE)
    warptrace.start(tmp_path / "run.wtrace")
    kept = wp.launch  # a program's own alias of the wrapper
    kept(_scale, dim=4, inputs=[x], outputs=[y], device=DEVICE)
    rec = weakref.ref(state.rec)
    ts = state.rec.local.state
    warptrace.stop()
    gc.collect()
    assert rec() is None and sys.getrefcount(ts) == 2  # `ts` and the argument: nothing else
    kept(_scale, dim=4, inputs=[x], outputs=[y], device=DEVICE)  # plain call now
    assert kept is not wp.launch and y.numpy().tolist() == [2.0] * 4
    assert COMPILED is None or isinstance(kept, COMPILED)


def test_the_wrapper_copies_pickles_and_binds_like_a_function(tracing):
    # wp.launch is a plain function: copy and deepcopy return it, pickle stores it by
    # name, a weak reference works, and as a class attribute it binds its instance
    import copy
    import pickle
    import weakref

    launch = wp.launch
    assert launch is not launch.__warptrace_original__
    assert copy.copy(launch) is launch and copy.deepcopy({"f": launch})["f"] is launch
    assert pickle.loads(pickle.dumps(launch)) is launch
    assert weakref.ref(launch)() is launch

    class Holder:
        run = wp.launch

    holder = Holder()
    assert Holder.run is launch
    bound = holder.run
    assert bound.__self__ is holder and bound.__func__ is launch


def _kinds_since(rec: Any, first: int) -> list[str]:
    """The kinds of the events rec holds in its buffers from seq ``first`` on."""
    from warptrace.trace.rows import EVENT_WIDTH
    from warptrace.trace.schema import EVENT_KIND_CODES

    names = {code: kind for kind, code in EVENT_KIND_CODES.items()}
    ev = rec.ev
    return [names[ev[i + 1]] for i in range(0, len(ev), EVENT_WIDTH) if ev[i] >= first]


def test_an_array_whose_getattr_launches_gets_the_rows_of_the_pure_path(tmp_path):
    # the identity state of an array seen first is read once before register() (as in
    # Python): an array subclass whose __getattr__ launches adds exactly those launches
    from warptrace.record import state

    z = wp.ones(4, dtype=float, device=DEVICE)
    w = wp.zeros(4, dtype=float, device=DEVICE)
    nested = []

    class Launching(wp.array):
        def __getattr__(self, name):
            if name.startswith("_warptrace") and not nested:
                nested.append(name)
                try:
                    wp.launch(_scale, 4, [z], [w], device=DEVICE)
                finally:
                    nested.pop()
            raise AttributeError(name)

    x = Launching(wp.ones(4, dtype=float, device=DEVICE).numpy(), dtype=float, device=DEVICE)
    y = wp.zeros(4, dtype=float, device=DEVICE)
    warptrace.start(tmp_path / "run.wtrace")
    try:
        rec = state.rec
        rec.flush_ev_len = rec.flush_acc_len = rec.flush_deadline = 1 << 62  # rows stay in the buffers
        first = rec.seq
        for _ in range(5):
            wp.launch(_scale, 4, [x], [y], device=DEVICE)
        assert rec.error_count == 0
        # getattr(x, STATE) in the wrapper, then once more in register(): two nested launches
        # (Warp 1.13 also reads the subclass's __array_interface__ at each launch: a bridge
        # event, not counted here)
        assert _kinds_since(rec, first).count("launch") == 5 + 2
    finally:
        warptrace.stop()


def test_a_stale_or_mismatched_build_falls_back_to_the_closure(monkeypatch):
    # an in-tree build of another _fastlaunch.c (ABI_VERSION differs) is not used, and
    # a compiled type that refuses its arguments leaves the pure-Python wrapper
    original = wp.launch

    class Refusing:
        def __init__(self, *args):
            raise TypeError("FastLaunch() takes 14 arguments")

    monkeypatch.setattr(launch_mod, "compiled_launch_type", lambda: Refusing)
    wrapper = launch_mod.make_launch(original)
    assert isinstance(wrapper, types.FunctionType) and wrapper.__wrapped__ is original
    monkeypatch.undo()
    if COMPILED is not None:
        from warptrace.record import _fastlaunch  # type: ignore[attr-defined]

        monkeypatch.setattr(_fastlaunch, "ABI_VERSION", compiled_mod.COMPILED_ABI + 1)
        assert launch_mod.compiled_launch_type() is None


def test_a_thread_state_attribute_replaced_on_the_class_is_seen(tmp_path):
    # the compiled wrapper reads ThreadState slots by offset; a class attribute that
    # replaces one (here `guard`: always inside warptrace) must be seen as in Python
    from warptrace.record import state
    from warptrace.record.session import ThreadState

    x = wp.ones(4, dtype=float, device=DEVICE)
    y = wp.zeros(4, dtype=float, device=DEVICE)
    warptrace.start(tmp_path / "run.wtrace")
    try:
        rec = state.rec
        wp.launch(_scale, 4, [x], [y], device=DEVICE)
        before = rec.seq
        member = ThreadState.__dict__["guard"]
        ThreadState.guard = property(lambda self: 1)  # type: ignore[assignment]
        try:
            wp.launch(_scale, 4, [x], [y], device=DEVICE)
            assert rec.seq == before
        finally:
            ThreadState.guard = member  # type: ignore[assignment]
        wp.launch(_scale, 4, [x], [y], device=DEVICE)
        assert rec.seq == before + 1 and rec.error_count == 0
    finally:
        warptrace.stop()


@needs_compiled
def test_a_thread_state_setattr_of_the_class_sees_the_compiled_stores(tmp_path):
    # the compiled wrappers store ThreadState's guard and copy_ctx by slot offset, as long as
    # the class has no __setattr__ of its own; with one, every store goes through it
    from warptrace.record import state
    from warptrace.record.session import ThreadState

    a = wp.ones(4, dtype=float, device=DEVICE)
    b = wp.zeros(4, dtype=float, device=DEVICE)
    stored: list[str] = []

    def setattr_seen(self: Any, name: str, value: Any) -> None:
        stored.append(name)
        object.__setattr__(self, name, value)

    warptrace.start(tmp_path / "run.wtrace")
    try:
        rec = state.rec
        for _ in range(2):  # the second time each call site is known: the compiled paths
            a.zero_()
            wp.copy(b, a)
        zero_calls, copy_calls = wp.array.zero_.recorded_calls, wp.copy.recorded_calls
        assert stored == []
        ThreadState.__setattr__ = setattr_seen  # type: ignore[method-assign]
        try:
            before = rec.seq
            a.zero_()
            wp.copy(b, a)
            assert rec.seq == before + 2 and rec.error_count == 0
            assert stored == ["guard", "guard", "guard", "copy_ctx", "guard", "copy_ctx"]
            assert (wp.array.zero_.recorded_calls, wp.copy.recorded_calls) == (zero_calls + 1, copy_calls + 1)
        finally:
            del ThreadState.__setattr__
        stored.clear()
        a.zero_()
        wp.copy(b, a)
        assert stored == [] and rec.error_count == 0
    finally:
        warptrace.stop()


@needs_compiled
def test_compiled_frame_walk_finds_the_sites_of_the_python_walk(tracing):
    # Sites.caller / alloc_caller: the C walk answers what the Python loop answers, and
    # leaves new code objects and positions to it (None)
    from warptrace.record import callsite, state

    sites = state.rec.sites
    walk = sites._walk
    init_code = wp.array.__init__.__code__
    assert walk is not None

    def both(method, *args):
        sites._walk = None
        try:
            expected = method(*args)
        finally:
            sites._walk = walk
        return expected, method(*args)

    def user_line():  # a test function: the user's frame
        return both(sites.caller, 1)

    expected, got = user_line()
    assert expected == got and expected >= 0
    # a position seen for the first time: C hands it to Python, which interns it
    for _ in range(2):
        first = walk(1, callsite._skip_code, {}, None, None)
        assert first is None

    # allocation sites, with their label
    made = []
    original = wp.array._init_new

    def probe(self, *args):
        made.append(both(sites.alloc_caller, init_code, 2))  # above `both` and probe
        return original(self, *args)

    wp.array._init_new = probe
    try:
        labelled = wp.zeros(3, dtype=float, device=DEVICE)
        wp.clone(labelled)
    finally:
        wp.array._init_new = original
    assert made and all(expected == got for expected, got in made)
    assert made[0][0][1] is True  # `labelled = wp.zeros(...)` names its array


@needs_compiled
def test_compiled_register_writes_the_rows_of_the_python_method(tmp_path):
    # fresh arrays (with and without a grad) go the compiled way; views, arrays made
    # before start() and grads seen before their owner the Python way; both write the
    # same `arrays` rows and state tuples
    import numpy as np

    from warptrace.record import identity, state

    before = wp.zeros(3, dtype=float, device=DEVICE)

    def record(compiled: bool):
        warptrace.start(tmp_path / f"run{int(compiled)}.wtrace")
        try:
            rec = state.rec
            ident = rec.ident
            scanned = ident.next_alloc  # the memory of arrays made before start()
            if not compiled:
                ident.register = identity.Identity.register.__get__(ident)
            with rec.lock:  # the dtypes seen once (the compiled path needs their names cached)
                ident.register(wp.zeros(1, dtype=float, device=DEVICE))
                ident.register(wp.zeros(1, dtype=wp.vec3, device=DEVICE))
            with_grad = wp.zeros(4, dtype=float, requires_grad=True, device=DEVICE)
            plain = wp.ones(2, dtype=wp.vec3, device=DEVICE)
            view = with_grad[1:3]
            grad_first = wp.zeros(5, dtype=float, requires_grad=True, device=DEVICE)
            # memory an array does not own, with no base: an alias of a live allocation, host
            # memory (a new external allocation; an array inside it; strided, over new memory)
            at = host.ctypes.data
            on_ptr = [
                wp.array(ptr=with_grad.ptr + 4, dtype=float, shape=(2,), device=DEVICE),
                wp.array(ptr=at, dtype=float, shape=(8,), device=DEVICE),
                wp.array(ptr=at + 8, dtype=float, shape=(4,), device=DEVICE),
                wp.array(ptr=at + 64, dtype=float, shape=(4,), strides=(8,), device=DEVICE),
                wp.array(ptr=at + 96, dtype=float, shape=(0,), device=DEVICE),  # empty: no memory
            ]
            with rec.lock:
                states = [
                    ident.register(a)
                    for a in (with_grad, plain, view, before, grad_first.grad, grad_first, *on_ptr)
                ]
                states.append(ident.register(with_grad))  # registered: the same tuple
            count = getattr(ident.register, "registered", None)
            rows = list(rec.array_rows)
            flat = list(rec.alloc_rows)  # (alloc_id, ptr, nbytes, device, kind, seq, site) rows, less the ptr
            allocs = [(*flat[i : i + 1], *flat[i + 2 : i + 7]) for i in range(0, len(flat), 7)]
            external = sorted(alloc_id for alloc_id in ident.external if alloc_id >= scanned)
        finally:
            warptrace.stop()
        return [s[1:] for s in states], rows, allocs, external, count

    host = np.zeros(32, dtype=np.float32)
    python_states, python_rows, python_allocs, python_external, _ = record(False)
    compiled_states, compiled_rows, compiled_allocs, compiled_external, count = record(True)
    assert compiled_states == python_states
    assert compiled_rows == python_rows
    assert compiled_allocs == python_allocs and compiled_external == python_external
    assert len(python_external) == 2  # the two host allocations
    # all but before, grad_first and its grad (seen before its owner) and the empty on_ptr array
    assert count == 11


@needs_compiled
def test_compiled_init_new_records_the_allocation_and_its_label(tracing):
    from warptrace.record import identity, state

    init_new = wp.array._init_new
    assert type(init_new).__name__ == "FastInitNew"
    rec = state.rec
    rows_before = len(rec.alloc_rows)
    calls = init_new.recorded_calls
    for _ in range(3):  # the first time the line is interned by the Python walk
        weights = wp.zeros(4, dtype=float, requires_grad=True, device=DEVICE)
    assert init_new.recorded_calls - calls >= 4  # the later arrays and their grads
    new = weights.__dict__[identity.NEW]
    grad_new = weights.grad.__dict__[identity.NEW]
    assert new[0] is rec.tok and new[3] >= 0 and new[4] is True
    assert rec.sites.label(new[1]) == "weights"
    assert grad_new[1] == new[1] and grad_new[4] is False  # the grad: its owner's site
    assert len(rec.alloc_rows) - rows_before == 6 * 7  # three arrays and three grads
    assert rec.error_count == 0
    # the recorder's tuples of ints and strings on each array are no work for the cyclic GC
    # (untracked from the start, as the GC itself would at their first collection), nor is
    # the grad's owner link: its weak reference has no callback, so it holds nothing strongly
    import gc

    wp.zeros(4, dtype=float, device=DEVICE).numpy()  # the first registration fills the caches, in Python
    weights.numpy()  # registered at its first use (in C): its state
    for arr in (weights, weights.grad):
        assert not gc.is_tracked(arr.__dict__[identity.NEW])
    assert not gc.is_tracked(weights.__dict__[identity.STATE])
    link = weights.grad.__dict__[identity.OWNER]
    assert link[1]() is weights and not gc.is_tracked(link) and not gc.is_tracked(link[1])
    # (the index's weak reference to what keeps each allocation alive is that same one)
    import weakref

    assert weakref.getweakrefs(weights) == [link[1]]
    # the compiled index holds the two allocations (pending: no lookup since) in C arrays
    assert type(rec.ident.index).__name__ == "Intervals"
    assert [e[2] for e in rec.ident.index.pending if e[2] in (new[3], grad_new[3])] == [new[3], grad_new[3]]


@needs_compiled
def test_compiled_zero_passes_the_originals_exception_through(tracing, monkeypatch):
    # Warp's own exception reaches the program unchanged, once, on every path (here an
    # original that raises, wrapped like array.zero_), and is no recorder error
    import time

    import warp._src.context as context

    from warptrace.record import identity, state
    from warptrace.record.wrap.common import TAPE_ATTR
    from warptrace.trace.schema import EVENT_KIND_CODES, FLAG_STORE, MEMSET, ROLE_WRITE

    calls = []

    def original(arr):
        calls.append(arr)
        raise RuntimeError("warp failed")

    zero = COMPILED_ZERO(
        original, original, vars(state), vars(context), identity.STATE, identity.NEW, TAPE_ATTR,
        EVENT_KIND_CODES[MEMSET], ROLE_WRITE, FLAG_STORE, time.perf_counter_ns,
    )  # fmt: skip
    rec = state.rec
    ts = rec.thread_state()
    x = wp.ones(4, dtype=float, device=DEVICE)
    y = wp.zeros(4, dtype=float, device=DEVICE)
    wp.launch(_double_into, 4, [x], [y], device=DEVICE)  # y: registered, no fresh allocation

    def zero_all():  # stands in for Tape.zero(): its memsets are batched
        zero(y)

    monkeypatch.setattr(state, "tape_zero_code", zero_all.__code__)
    ts.zeroed = []
    try:
        with pytest.raises(RuntimeError, match="warp failed"):
            zero_all()
        assert ts.zeroed == [] and ts.guard == 0
    finally:
        ts.zeroed = None
    with pytest.raises(RuntimeError, match="warp failed"):
        zero(y)
    assert len(calls) == 2 and rec.error_count == 0 and ts.guard == 0


@pytest.mark.skipif(
    compiled_mod.compiled_piece("Intervals") is None, reason="the compiled module is not built here"
)
def test_compiled_index_answers_as_the_python_index():
    """``Intervals`` (C arrays, weakrefs without callbacks, dead entries dropped lazily) and
    ``AllocIndex`` (keepers whose callbacks report the frees), driven by one random history of
    allocations (overlapping reuse of freed memory, keepers that cannot be weakly referenced,
    empty ones), frees and lookups at every reap threshold tried, answer every lookup alike
    and hold the same live intervals."""
    import gc
    import random

    from warptrace.record.identity import AllocIndex

    class Memory:  # a weak-referenceable stand-in for the object that keeps an allocation alive
        pass

    for reap_pending in (1, 7, 512):
        compiled = compiled_mod.compiled_piece("Intervals")(reap_pending)
        python = AllocIndex()
        rng = random.Random(reap_pending)
        alive: dict[int, tuple[Memory, Memory]] = {}
        for alloc_id in range(3000):
            start = rng.randrange(0, 1 << 16, 16)
            end = start + rng.choice((1, 16, 64, 256, 4096))
            if rng.random() < 0.02:  # not weak-referenceable: lives until an allocation replaces it
                compiled.add(start, end, alloc_id, alloc_id)
                python.add(start, end, alloc_id, alloc_id)
            else:
                keep = (Memory(), Memory())
                compiled.add(start, end, alloc_id, keep[0])
                python.add(start, end, alloc_id, keep[1])
                alive[alloc_id] = keep
            if len(python.pending) >= reap_pending:
                python._reap()  # AllocIndex's own threshold is the module's REAP_PENDING
            for _ in range(rng.randrange(3)):
                if alive:
                    del alive[rng.choice(list(alive))]
            gc.collect(0)
            if rng.random() < 0.3:
                lo = rng.randrange(0, 1 << 16)
                hi = lo + rng.choice((0, 1, 8, 100))
                assert compiled.find(lo, hi) == python.find(lo, hi)
            if rng.random() < 0.05:
                assert [e[2] for e in compiled.pending] == [e[2] for e in python.pending]
                python._reap()  # entries(): the pending ones brought in, the dead ones gone
                assert compiled.entries() == list(zip(python.starts, python.ends, python.ids))
        assert len(compiled) == len(python)
        assert compiled.entries() == list(zip(python.starts, python.ends, python.ids))
    with pytest.raises(OverflowError):  # an address beyond int64: a recording error, never a wrong answer
        compiled.add(1 << 64, (1 << 64) + 8, 1, Memory())


@pytest.mark.skipif(
    compiled_mod.compiled_piece("pack_int64") is None, reason="the compiled module is not built here"
)
def test_packed_rows_hold_the_ints_of_the_list():
    """``pack_int64`` (the rows sent to the trace-writer process): every int64, small, of two
    30-bit digits (read in place) or more, negative, bool and int subclass, as native int64s
    (what ``int_rows`` of the list gives); None for a list with a value that is not an int64."""
    import random

    import numpy as np

    from warptrace.trace.rows import int_rows

    class Code(int):
        pass

    pack = compiled_mod.compiled_piece("pack_int64")
    rng = random.Random(3)
    edges = [0, 1, -1, 2**30 - 1, 2**30, -(2**30), 2**60 - 1, -(2**60) + 1, 2**60, -(2**63), 2**63 - 1]
    values = [*edges, True, False, Code(7), Code(-(2**61))]
    values += [rng.randint(-(2**63), 2**63 - 1) for _ in range(2000)]
    values += [rng.randint(-(2**40), 2**40) for _ in range(2000)]
    values = values[: len(values) // 7 * 7]  # whole access rows
    packed = pack(values)
    assert np.frombuffer(packed, dtype=np.int64).tolist() == [int(v) for v in values]
    assert int_rows(packed, 7, print).tolist() == int_rows(values, 7, print).tolist()
    assert pack([]) == b""
    for bad in ([1, 2**63], [-(2**63) - 1], [1, 1.0], [None], [1, "x"]):
        assert pack(bad) is None
    assert pack((1, 2)) is None  # only a list


@pytest.mark.skipif(
    compiled_mod.compiled_piece("FastRow") is None, reason="the compiled module is not built here"
)
def test_compiled_row_appends_the_rows_of_the_python_method(tracing):
    """``Recorder.row`` compiled (``FastRow``, the recorder's ``row`` attribute) and the Python
    method append the same event, extra and access rows: a fresh seq, a reserved one given back
    out of order (``disordered``), a value and a detail, accesses as tuples and as lists, the
    optional kernel and dim columns; keywords go to the method."""
    from warptrace.record import state
    from warptrace.record.session import Recorder

    rec = state.rec
    assert type(rec.row).__name__ == "FastRow"
    python_row = Recorder.row.__get__(rec)
    calls = [
        ((0, 3, 1, True, 0, False, True, 5, -1, 2, -1, None, None, ((1, 2, 1, 0, 0, 0),)), {}),
        (
            (
                1,
                4,
                -1,
                False,
                1,
                True,
                False,
                6,
                7,
                -1,
                3,
                2.5,
                '{"x": 1}',
                [[4, 5, 2, 8, 1, 0], (6, 7, 1, 0, 0, 2)],
            ),
            {},
        ),
        ((0, 5, 2, False, 0, False, True, 8, -1, -1, -1, 0.0, None, (), 9, 11), {}),
        ((0, 6, 2, False, 0, False, True, 8, -1, -1, -1, None, "d", ()), {"kernel": 3, "dim_code": 4}),
    ]

    def written(row: Callable[..., int]) -> list[tuple[Any, ...]]:
        rows = []
        for with_reserved in (False, True):
            for args, kwargs in calls:
                with rec.lock:
                    ev0, acc0, extra0 = len(rec.ev), len(rec.acc), len(rec.ev_extra)
                    seq = rec.reserve() if with_reserved else -1
                    later = rec.reserve() if with_reserved else -1  # taken first: the row comes out of order
                    rec.disordered = False
                    got = row(*args[:14], seq, *args[14:], **kwargs)
                    if later >= 0:
                        rec.release(later)
                    ev, acc, extra = rec.ev[ev0:], rec.acc[acc0:], rec.ev_extra[extra0:]
                    base = got
                    rows.append(
                        (
                            [v - base if i == 0 else (None if i == 10 else v) for i, v in enumerate(ev)],
                            [v - base if i % 7 == 0 else v for i, v in enumerate(acc)],
                            [(e[0] - base, e[1], e[2]) for e in extra],
                            rec.disordered if with_reserved else None,
                            seq in rec.open_seqs,
                        )
                    )
        return rows

    assert written(rec.row) == written(python_row)


@needs_compiled
def test_compiled_read_writes_the_rows_of_the_python_wrapper(tracing):
    """``array.numpy()``/``list()`` compiled (``FastRead``): a known call site gives the row the
    Python wrapper writes, with the same detail (``memory.read_detail``: digest, size, zero-copy
    view) for a contiguous read, an empty one, a strided view's copy, one above the digest cap,
    and none for ``list()``; inside a tape the tape's id. A read of up to 4 KiB leaves its
    detail as (bytes, view), which the trace writer turns into the same text
    (``rows.detail_text``); a larger one is hashed here."""
    import numpy as np

    from warptrace.record import state
    from warptrace.record.wrap.hostdata import DIGEST_MAX_BYTES
    from warptrace.record.wrap.memory import read_detail
    from warptrace.trace.rows import EVENT_WIDTH, detail_text
    from warptrace.trace.schema import EVENT_KIND_CODES, VALUE_READ

    assert COMPILED_READ is not None and isinstance(wp.array.numpy, COMPILED_READ)
    rec = state.rec
    rec.flush_ev_len = rec.flush_acc_len = 1 << 60  # every row stays in the buffers
    rec.flush_deadline = 1 << 62
    read = wp.array.numpy
    base = wp.array(np.arange(12, dtype=np.float32).reshape(3, 4), requires_grad=True, device=DEVICE)
    arrays = {
        "plain": base,
        "empty": wp.zeros(0, dtype=float, device=DEVICE),
        "strided": base[:, 1],  # a view with strides: numpy() of it is no C-contiguous copy
        "large": wp.ones(DIGEST_MAX_BYTES // 4 + 1, dtype=float, device=DEVICE),
        "medium": wp.ones(1025, dtype=float, device=DEVICE),  # 4,100 bytes: hashed while recording
    }
    deferred = {"plain", "empty"}  # (numpy() of the strided view is a strided view: Python's)

    def last_read(first: int) -> tuple[Any, ...]:
        ev = rec.ev
        rows = [ev[i : i + EVENT_WIDTH] for i in range(0, len(ev), EVENT_WIDTH)]
        reads = [r for r in rows if r[0] >= first and r[1] == EVENT_KIND_CODES[VALUE_READ]]
        assert len(reads) == 1
        extra = {e[0]: e[2] for e in rec.ev_extra}
        return reads[0], extra.get(reads[0][0])

    for name, arr in arrays.items():
        details = []
        for _ in range(2):  # the site is new the first time (the Python wrapper), then known
            first, calls = rec.seq, read.recorded_calls
            result = arr.numpy()
            row, detail = last_read(first)
            details.append(detail)
            if len(details) == 2:  # the compiled path's
                assert isinstance(detail, tuple if name in deferred else str), name
            assert detail_text(detail) == read_detail(arr, result), name
            assert row[12] == arr._warptrace_state[1]  # the event's array_id
        assert read.recorded_calls == calls + 1, name  # the second read was the compiled path's
        assert detail_text(details[0]) == detail_text(details[1])
    assert '"view": true' in read_detail(arrays["plain"], arrays["plain"].numpy())
    assert '"digest": null' in read_detail(arrays["large"], arrays["large"].numpy())
    tape = wp.Tape()
    with tape:
        for _ in range(2):
            first = rec.seq
            values = base.list()
            row, detail = last_read(first)
            assert row[2] == tape._warptrace_tape[1] and detail is None and len(values) == 12
    assert rec.error_count == 0


@needs_compiled
def test_compiled_copy_from_host_memory_gives_the_detail_of_the_python_wrapper(tracing):
    """``wp.array(ndarray)`` and ``assign(ndarray)`` copy from host memory Warp did not
    allocate: the compiled ``FastCopy`` leaves a C-contiguous source of up to 4 KiB as (its
    bytes, ``HOST_WRITE``), which the trace writer turns into the text
    ``hostdata.transfer_detail`` gives for the values written (``rows.detail_text``); a strided
    source, a larger one and one above the digest cap get that text while recording."""
    import numpy as np

    from warptrace.record import state
    from warptrace.record.wrap import hostdata
    from warptrace.trace.rows import EVENT_WIDTH, HOST_WRITE, detail_text
    from warptrace.trace.schema import COPY, EVENT_KIND_CODES

    rec = state.rec
    rec.flush_ev_len = rec.flush_acc_len = 1 << 60  # every row stays in the buffers
    rec.flush_deadline = 1 << 62
    grid = np.arange(24, dtype=np.float32).reshape(4, 6)
    sources = {
        "plain": (np.linspace(0.0, 1.0, 16, dtype=np.float32), float),
        "2-d": (grid, float),
        "vec3": (np.arange(12, dtype=np.float32).reshape(4, 3), wp.vec3),
        "4 KiB": (np.ones(1024, dtype=np.float32), float),
        "strided": (grid[:, ::2], float),  # Warp copies from the strided memory as it is
        "medium": (np.ones(1025, dtype=np.float32), float),  # 4,100 bytes
        "int": (np.arange(5, dtype=np.int32), wp.int32),
    }
    deferred = {"plain", "2-d", "vec3", "4 KiB", "int"}

    def last_copy(first: int) -> Any:
        ev = rec.ev
        rows = [ev[i : i + EVENT_WIDTH] for i in range(0, len(ev), EVENT_WIDTH)]
        copies = [r for r in rows if r[0] >= first and r[1] == EVENT_KIND_CODES[COPY]]
        assert len(copies) == 1
        return {e[0]: e[2] for e in rec.ev_extra}.get(copies[0][0])

    for name, (values, dtype) in sources.items():
        expected = hostdata.transfer_detail("write", values, False)
        for round_ in range(2):  # the site is new the first time (the Python wrapper), then known
            first, calls = rec.seq, wp.copy.recorded_calls
            made = wp.array(values, dtype=dtype, device=DEVICE, requires_grad=True)
            detail = last_copy(first)
            assert detail_text(detail) == expected, name
            if round_:
                assert wp.copy.recorded_calls == calls + 1, name  # the compiled path's
                assert (isinstance(detail, tuple) and detail[1] == HOST_WRITE) == (name in deferred), name
            first = rec.seq
            made.assign(values)
            assert detail_text(last_copy(first)) == expected, name
    assert rec.error_count == 0


# three arrays rows and two allocs rows (flat), every kind of value their columns hold
_ARRAY_ROWS = (
    0, 3, 0, (16,), (4,), 4, "float32", "cpu", "owned", True, False, -1, -1, 5, 2, "x",
    1, -1, 8, [2, 3], [], 4, "float32", "cpu", "opaque", False, False, 0, 0, 6, -1, "",
    2, 7, 2**40, (), (), 0, "vec3f", "cuda:0", "view", False, True, 2**33, 1, -(2**62), 2**31 - 1, "é",
)  # fmt: skip
_ALLOC_ROWS = (0, 2**47, 64, "cpu", "owned", 4, 2, 1, 5, 0, "cuda:0", "external", -1, -1)


@pytest.mark.skipif(
    compiled_mod.compiled_piece("pack_rows") is None, reason="the compiled module is not built here"
)
def test_packed_table_rows_give_the_columns_of_the_list():
    """``pack_rows`` (the arrays and allocs rows sent to the trace-writer process) and
    ``parts_columns`` (their columns there): the columns of the flat lists, also for parts of a
    table that came packed and as lists in turn; None for a row with a value of another type
    than its column's (sent as the list it is)."""
    import pyarrow as pa

    from warptrace.trace import schema
    from warptrace.trace.rows import PACKED_SPECS, RowParts, parts_columns

    letters = {
        pa.types.is_integer: "i",
        pa.types.is_boolean: "b",
        pa.types.is_string: "s",
        pa.types.is_list: "T",
    }
    for table, spec in PACKED_SPECS.items():  # the specs are the schemas' column types
        fields = schema.SCHEMAS[table]
        assert spec == "".join(next(c for test, c in letters.items() if test(f.type)) for f in fields), table
    pack = compiled_mod.compiled_piece("pack_rows")
    arrays, allocs = list(_ARRAY_ROWS), list(_ALLOC_ROWS)
    for table, rows in (("arrays", arrays), ("allocs", allocs)):
        fields = schema.SCHEMAS[table]
        width = len(fields)
        expected = {f.name: pa.array(rows[i::width], type=f.type) for i, f in enumerate(fields)}
        packed = pack(rows, PACKED_SPECS[table])
        assert packed is not None
        assert parts_columns(table, RowParts([packed])) == expected
        # rows in three batches: packed, a list, packed
        split = [rows[:width], rows[width : 2 * width], rows[2 * width :]]
        parts = RowParts([pack(split[0], PACKED_SPECS[table]), split[1], pack(split[2], PACKED_SPECS[table])])
        assert parts_columns(table, parts) == expected  # (the allocs' third part is empty)
    spec = PACKED_SPECS["allocs"]
    for bad in ([*allocs[:-1], None], [*allocs[:3], b"cpu", *allocs[4:]], [*allocs[:-1], 2**63], allocs[:-1]):
        assert pack(bad, spec) is None
    assert pack([*arrays[:3], (1.5,), *arrays[4:16]], PACKED_SPECS["arrays"]) is None
    assert pack([*arrays[:9], 1, *arrays[10:16]], PACKED_SPECS["arrays"]) is None  # a bool column


@pytest.mark.skipif(
    compiled_mod.compiled_piece("Rows") is None, reason="the compiled module is not built here"
)
def test_row_buffers_hold_the_list_and_pack_it():
    """The session's compiled row buffers (``Rows``): filled row by row, value by value or in
    any split, they hold what the list would (length, items, slices, iteration), and
    ``packed()`` is what ``pack_int64``/``pack_rows`` make of that list. A value its column
    cannot hold, or an item assignment, turns the buffer into that list (``plain`` gives it
    to the writer as a list); a partial row is not packed; a buffer pickles as its values."""
    import pickle

    from warptrace.record.compiled import ROW_BUFFERS, row_buffer_maker
    from warptrace.trace.rows import plain

    make = row_buffer_maker()
    pack_int64, pack_rows = (compiled_mod.compiled_piece(name) for name in ("pack_int64", "pack_rows"))
    arrays, allocs = list(_ARRAY_ROWS), list(_ALLOC_ROWS)
    ev = [*range(14), 2**62, 5, 1, -1, True, False, True, 2**31, -(2**40), 3, 2**60, 0, -1, -1, 7, 8]
    acc = [0, 1, 2, 3, 4, 5, 6, 1, -1, 2**35, 0, True, 3, 0]
    for name, rows in (("array_rows", arrays), ("alloc_rows", allocs), ("ev", ev), ("acc", acc)):
        spec = ROW_BUFFERS[name]
        width = len(spec)
        expected = pack_int64(rows) if set(spec) == {"i"} else pack_rows(rows, spec)
        assert expected is not None
        values = [tuple(v) if isinstance(v, list) else v for v in rows]
        by_row, by_value, split = make(name), make(name), make(name)
        for i in range(0, len(rows), width):
            by_row.extend(tuple(rows[i : i + width]))
        for v in rows:
            by_value.append(v)
        split.extend(rows[:5])
        split.extend(iter(rows[5:]))
        for buf in (by_row, by_value, split):
            assert buf.packed() == expected
            assert plain(buf) == expected
            assert len(buf) == len(rows) and list(buf) == buf.tolist() == values
            assert buf[3] == values[3] and buf[-2:] == values[-2:]
            assert pickle.loads(pickle.dumps(buf)).packed() == expected
    buf = make("alloc_rows")
    buf.extend(tuple(allocs[:7]))
    buf.append(None)
    buf.extend(allocs[8:])
    assert buf.packed() is None and plain(buf) == [*allocs[:7], None, *allocs[8:]]
    buf = make("acc")
    buf.extend(tuple(acc[:7]))
    buf[-1] = "not an int"
    assert buf.packed() is None and plain(buf) == [*acc[:6], "not an int"]
    buf.append(1)  # (a list from then on)
    assert len(buf) == 8
    buf = make("ev")
    buf.extend(ev[:3])
    assert buf.packed() is None and len(buf) == 3
    assert not make("ev") and len(make("ev")) == 0


@pytest.mark.skipif(
    compiled_mod.compiled_piece("Lock") is None, reason="the compiled module is not built here"
)
def test_session_lock_behaves_as_an_rlock():
    """The compiled session lock (``Lock``) against ``threading.RLock``: reentrant, released by
    its owner only, ``acquire(blocking=False)`` and ``acquire(timeout=...)`` from another thread
    False while held and True once released, the context manager, ``_is_owned()``; a thread
    waiting on it does not hold the interpreter lock (the owner runs Python meanwhile)."""
    import threading
    import time

    from warptrace.record.compiled import session_lock

    for lock in (session_lock(), threading.RLock()):
        assert type(lock).__name__ in ("Lock", "RLock")
        assert lock.acquire() is True and lock.acquire(timeout=0.5) is True
        assert lock._is_owned()
        seen: list[object] = []

        def other(lock: object = lock, seen: list[object] = seen) -> None:
            seen.append(lock.acquire(blocking=False))  # type: ignore[attr-defined]
            seen.append(lock.acquire(timeout=0.05))  # type: ignore[attr-defined]
            try:
                lock.release()  # type: ignore[attr-defined]
            except RuntimeError:
                seen.append("not the owner")
            seen.append(lock._is_owned())  # type: ignore[attr-defined]

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
        assert seen == [False, False, "not the owner", False]
        lock.release()
        assert lock._is_owned()  # (taken twice, released once)
        lock.release()
        assert not lock._is_owned()
        with pytest.raises(RuntimeError):
            lock.release()
        with pytest.raises(ValueError):
            lock.acquire(False, 1.0)
        with lock, lock:  # (reentrant)
            assert lock._is_owned()
        assert not lock._is_owned()
        # a waiter blocks without the interpreter lock: the owner keeps running Python code
        waited: list[float] = []
        lock.acquire()

        def waiter(lock: object = lock, waited: list[float] = waited) -> None:
            start = time.perf_counter()
            with lock:  # type: ignore[attr-defined]
                waited.append(time.perf_counter() - start)

        thread = threading.Thread(target=waiter)
        thread.start()
        total = sum(range(200_000))  # Python code while the other thread waits
        time.sleep(0.05)
        lock.release()
        thread.join(5)
        assert total and len(waited) == 1 and waited[0] >= 0.04


@needs_compiled
def test_counters_hold_the_sessions_seq_and_flush_limits(tmp_path, monkeypatch):
    """With the C module a session's seq, flush limits and row buffers are the fields of its
    compiled ``Counters``: the compiled wrappers advance and append to them in place, the Recorder's attributes
    forward to them (reads, writes from Python), and each launch takes the next number;
    with ``WARPTRACE_PURE_PYTHON=1`` they are plain attributes of a plain Recorder."""
    from warptrace.record.counters import CountedRecorder
    from warptrace.record.session import Recorder
    from warptrace.trace.rows import EVENT_WIDTH

    x = wp.ones(4, dtype=float, device=DEVICE)
    y = wp.zeros(4, dtype=float, device=DEVICE)
    warptrace.start(tmp_path / "counted.wtrace")
    try:
        rec = state.rec
        assert type(rec) is CountedRecorder and not {"seq", "ev", "acc", "ev_extra"} & set(vars(rec))
        rec.flush_ev_len = rec.flush_acc_len = rec.flush_deadline = 1 << 62  # rows stay buffered
        assert rec.counters.flush_ev_len == rec.counters.flush_deadline == 1 << 62
        first, rows = rec.seq, len(rec.ev)
        for _ in range(3):
            wp.launch(_scale, dim=4, inputs=[x], outputs=[y], device=DEVICE)
        assert rec.seq == rec.counters.seq == first + 3
        seqs = [rec.ev[i] for i in range(rows, len(rec.ev), EVENT_WIDTH)]
        assert seqs == [first, first + 1, first + 2]
        assert rec.ev is rec.counters.ev and rec.acc is rec.counters.acc
        rec.flush(force=True, wait=True)  # rebinds the buffers: the compiled wrappers append to the new ones
        assert len(rec.ev) == 0 and rec.ev is rec.counters.ev
        rec.seq = rec.seq + 10  # a write from Python: the next compiled event takes it
        wp.launch(_scale, dim=4, inputs=[x], outputs=[y], device=DEVICE)
        assert len(rec.ev) == EVENT_WIDTH and rec.ev[0] == first + 13 and rec.counters.seq == first + 14
    finally:
        warptrace.stop()
    monkeypatch.setenv(compiled_mod.PURE_PYTHON_ENV, "1")
    warptrace.start(tmp_path / "plain.wtrace")
    try:
        rec = state.rec
        assert type(rec) is Recorder and "seq" in vars(rec) and "counters" not in vars(rec)
    finally:
        warptrace.stop()


@needs_compiled
def test_compiled_wrappers_use_a_plain_recorders_attributes(tmp_path, monkeypatch):
    """A Recorder without ``Counters`` (one made directly, not by ``new_recorder``) under the
    compiled wrappers: seq, the row buffers and the flush limits are read from and written to
    its ``__dict__`` (the C module's fallback), with the same numbering."""
    from warptrace.record import recorder as recorder_mod
    from warptrace.record.session import Recorder
    from warptrace.trace.rows import EVENT_WIDTH

    x = wp.ones(4, dtype=float, device=DEVICE)
    y = wp.zeros(4, dtype=float, device=DEVICE)
    monkeypatch.setattr(recorder_mod, "new_recorder", Recorder)
    warptrace.start(tmp_path / "plain.wtrace")
    try:
        rec = state.rec
        assert type(rec) is Recorder and {"seq", "ev", "flush_deadline"} <= set(vars(rec))
        assert type(wp.launch).__name__ == "FastLaunch"
        rec.flush_ev_len = rec.flush_acc_len = rec.flush_deadline = 1 << 62  # rows stay buffered
        first, rows = rec.seq, len(rec.ev)
        for _ in range(3):
            wp.launch(_scale, dim=4, inputs=[x], outputs=[y], device=DEVICE)
        assert rec.seq == first + 3
        assert [rec.ev[i] for i in range(rows, len(rec.ev), EVENT_WIDTH)] == [first, first + 1, first + 2]
        rec.flush_ev_len = 0  # the next event flushes
        wp.launch(_scale, dim=4, inputs=[x], outputs=[y], device=DEVICE)
        assert len(rec.ev) == 0 and rec.seq == first + 4
    finally:
        warptrace.stop()
    assert y.numpy().tolist() == [2.0] * 4
