"""Install/uninstall: importing patches nothing, stop() restores the very same objects."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import warp as wp
import warp._src.context
import warp._src.tape
import warp._src.types
import warp._src.utils
from warp import launch as launch_bound_before_start  # an alias the recorder must find

import warptrace
from tests.test_record_common import DEVICE, Trace, store_kernel
from warptrace.record import install, recorder
from warptrace.trace.schema import SCHEMA_VERSION

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def trace_path(tmp_path):
    yield tmp_path / "run.wtrace"
    warptrace.stop()


def _targets() -> dict[tuple[int, str], object]:
    """Every attribute warptrace may patch, as the raw object stored on its owner."""
    owners = [
        warp,
        warp._src.context,
        warp._src.utils,
        warp.utils,
        warp._src.types.array,
        warp._src.types.noncontiguous_array_base,
        warp._src.context.Launch,
        warp._src.tape.Tape,
        sys.modules[__name__],
    ]
    found = {}
    for owner in owners:
        for name, value in list(vars(owner).items()):
            found[(id(owner), name)] = value
    return found


def test_importing_warptrace_patches_nothing():
    script = textwrap.dedent(
        """
        import sys, warp, warp._src.context as c, warp._src.types as t, warp._src.tape as tp
        before = {n: getattr(c, n) for n in ("launch", "copy", "capture_launch")}
        methods = dict(vars(t.array)); tape = dict(vars(tp.Tape)); top = warp.launch
        import warptrace, warptrace.record, warptrace.record.recorder, warptrace.record.wrap.launch
        assert all(getattr(c, n) is v for n, v in before.items())
        assert all(vars(t.array)[k] is v for k, v in methods.items())
        assert all(vars(tp.Tape)[k] is v for k, v in tape.items()) and warp.launch is top
        print("clean")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.stdout.strip().endswith("clean"), out.stderr


def test_stop_restores_every_patched_attribute(trace_path):
    before = _targets()
    original_launch = warp._src.context.launch
    warptrace.start(trace_path)
    patched = install.installed()
    assert patched, "nothing was patched"
    assert warp.launch is warp._src.context.launch is not original_launch
    assert launch_bound_before_start is warp.launch, "`from warp import launch` alias not rebound"
    assert warp.utils.array_scan is warp._src.utils.array_scan
    for patch in patched:
        if (id(patch.owner), patch.name) in before:
            assert before[(id(patch.owner), patch.name)] is patch.original
    names = {(getattr(p.owner, "__name__", ""), p.name) for p in patched}
    for expected in [
        ("warp", "launch"), ("warp._src.context", "launch"), ("warp", "copy"), ("warp._src.context", "copy"),
        ("array", "_init_new"), ("array", "_init_from_ptr"), ("array", "zero_"), ("array", "fill_"),
        ("array", "numpy"), ("array", "grad"), ("array", "requires_grad"), ("array", "retain_grad"),
        ("Tape", "__init__"), ("Tape", "__enter__"), ("Tape", "__exit__"), ("Tape", "backward"),
        ("Tape", "zero"), ("Tape", "reset"), ("Tape", "record_func"), ("Launch", "launch"),
        ("warp", "capture_begin"), ("warp", "capture_end"), ("warp", "capture_launch"),
        ("warp._src.utils", "array_scan"), ("warp._src.utils", "radix_sort_pairs"),
    ]:  # fmt: skip
        assert expected in names, expected
    launched_through_wrapper = warp.launch
    warptrace.stop()

    after = _targets()
    assert set(after) == set(before)
    changed = [key for key, value in before.items() if after[key] is not value]
    assert changed == [], changed
    assert warp.launch is original_launch and launch_bound_before_start is original_launch
    assert install.installed() == []
    # a wrapper someone kept a reference to passes straight through after stop()
    x, y = wp.zeros(2, dtype=float, device=DEVICE), wp.zeros(2, dtype=float, device=DEVICE)
    launched_through_wrapper(store_kernel, dim=2, inputs=[x], outputs=[y], device=DEVICE)


def test_start_and_stop_are_idempotent(trace_path):
    warptrace.start(trace_path)
    first = install.installed()
    warptrace.start(trace_path.with_name("other.wtrace"))
    assert install.installed() == first and recorder.active().path == trace_path
    assert warptrace.stop() == str(trace_path)
    assert warptrace.stop() is None
    assert not trace_path.with_name("other.wtrace").exists()


def test_trace_context_manager_finishes_the_trace_on_error(trace_path):
    with pytest.raises(ValueError), warptrace.trace(trace_path):
        x = wp.zeros(2, dtype=float, device=DEVICE)
        wp.launch(store_kernel, dim=2, inputs=[x, x], device=DEVICE)
        raise ValueError("user bug")
    assert recorder.active() is None and install.installed() == []
    meta = json.loads((trace_path / "meta.json").read_text())
    assert meta["complete"] is True and meta["error"] == "ValueError: user bug"
    assert len(Trace(trace_path).launches()) == 1


def test_meta_and_summary(trace_path):
    warptrace.start(trace_path, run_label="unit")
    meta = json.loads((trace_path / "meta.json").read_text())
    assert meta["complete"] is False and meta["schema_version"] == SCHEMA_VERSION
    x = wp.array([1.0, 2.0], dtype=float, device=DEVICE, requires_grad=True)
    y = wp.zeros(2, dtype=float, device=DEVICE, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(store_kernel, dim=2, inputs=[x], outputs=[y], device=DEVICE)
    wp.launch(store_kernel, dim=2, inputs=[x], outputs=[y], device=DEVICE)
    tape.backward(grads={y: wp.ones(2, dtype=float, device=DEVICE)})
    tape.zero()
    assert warptrace.stop(exit_status=3) == str(trace_path)

    meta = json.loads((trace_path / "meta.json").read_text())
    assert meta["complete"] is True and meta["exit_status"] == 3
    assert meta["warp_version"] == wp.config.version and meta["run_label"] == "unit"
    assert meta["argv"] == sys.argv and meta["devices"]
    summary = recorder.last_summary
    assert summary == meta["summary"]
    assert summary["trace"] == str(trace_path)
    assert (summary["tapes"], summary["recorded_launches"], summary["untaped_launches"]) == (1, 1, 1)
    assert (summary["adjoint_launches"], summary["backward_calls"], summary["copies"]) == (1, 1, 2)
    assert summary["memsets"] == 2 and summary["arrays"] >= 4 and summary["recorder_errors"] == 0


def test_flush_writes_parts_while_running(trace_path):
    warptrace.start(trace_path)
    x = wp.zeros(2, dtype=float, device=DEVICE)
    wp.launch(store_kernel, dim=2, inputs=[x, x], device=DEVICE)
    recorder.flush()
    assert list((trace_path / "events").glob("part-*.parquet"))
    assert len(Trace(trace_path).launches()) == 1
    wp.launch(store_kernel, dim=2, inputs=[x, x], device=DEVICE)
    warptrace.stop()
    assert len(Trace(trace_path).launches()) == 2


def test_spelled_out_wrappers_only_for_originals_without_defaults():
    # a wrapper that spells out the original's parameters must not drop a default: an
    # original with one gets the generic wrapper (launch and copy copy or check theirs)
    from warptrace.record.wrap.common import positional_params

    def plain(self, value): ...

    def with_default(self, value=0.0): ...

    assert positional_params(plain) == ("self", "value")
    assert positional_params(with_default) is None
    assert positional_params(with_default, with_defaults=True) == ("self", "value")
