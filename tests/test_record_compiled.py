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
from pathlib import Path

import pytest

wp = pytest.importorskip("warp")

import warptrace  # noqa: E402
from tests.test_record_common import DEVICE  # noqa: E402
from warptrace.record.wrap import launch as launch_mod  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
COMPILED = launch_mod.compiled_launch_type()
needs_compiled = pytest.mark.skipif(
    COMPILED is None, reason="the compiled launch wrapper is not built here (or WARPTRACE_PURE_PYTHON is set)"
)

# tapes and backward (adjoint launches), struct fields (nested too), optimizers (Warp's
# own launches), generic kernels, a program split over modules
PROGRAMS = (
    "ok_flow_multi_head",
    "ok_mem_struct_accumulate",
    "wt104_nested_struct",
    "ok_mem_optimizer",
    "wt407_generic",
    "wt306_optim/wt306_optim_main",
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
    monkeypatch.setenv(launch_mod.PURE_PYTHON_ENV, "1")
    assert launch_mod.compiled_launch_type() is None
    original = wp.launch
    wrapper = launch_mod.make_launch(original)
    assert isinstance(wrapper, types.FunctionType)
    assert wrapper.__wrapped__ is original


def _record(out: Path, pure: bool) -> None:
    env = dict(os.environ)
    env.pop(launch_mod.PURE_PYTHON_ENV, None)
    if pure:
        env[launch_mod.PURE_PYTHON_ENV] = "1"
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
    from warptrace.trace.reader import read_trace

    pure, compiled = tmp_path / "pure", tmp_path / "compiled"
    pure.mkdir()
    compiled.mkdir()
    _record(pure, pure=True)
    _record(compiled, pure=False)
    assert (pure / "kind").read_text() == "pure" and (compiled / "kind").read_text() == "compiled"
    traces = sorted(p.name for p in pure.glob("*.wtrace"))
    assert traces == sorted(p.name for p in compiled.glob("*.wtrace")) and len(traces) == len(PROGRAMS)
    for name in traces:
        a, b = read_trace(pure / name), read_trace(compiled / name)
        assert sorted(a.tables) == sorted(b.tables)
        assert a.tables["events"].num_rows > 0
        for table in a.tables:
            x, y = a.tables[table], b.tables[table]
            columns = [c for c in x.column_names if c not in _SKIP_COLUMNS]
            rows_a, rows_b = x.select(columns).to_pylist(), y.select(columns).to_pylist()
            first = next((i for i, (r, s) in enumerate(zip(rows_a, rows_b)) if r != s), None)
            shown = slice(first or 0, (first or 0) + 1)
            assert (len(rows_a), first) == (len(rows_b), None), (name, table, rows_a[shown], rows_b[shown])


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
        first = rec.seq
        for _ in range(5):
            wp.launch(_scale, 4, [x], [y], device=DEVICE)
        assert rec.error_count == 0
        # getattr(x, STATE) in the wrapper, then once more in register(): two nested launches
        assert rec.seq - first == 5 + 2
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

        monkeypatch.setattr(_fastlaunch, "ABI_VERSION", launch_mod.COMPILED_ABI + 1)
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
