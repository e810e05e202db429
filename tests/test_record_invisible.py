"""The wrappers are invisible to Warp's stack walks and to introspection of the wrapped API."""

from __future__ import annotations

import contextlib
import inspect
import io
import linecache
import os
import types
import warnings

import numpy as np
import pytest
import warp as wp
import warp._src.context

import warptrace
from tests.test_record_common import DEVICE, store_kernel


@pytest.fixture(params=[False, True], ids=["plain", "numerics"])
def tracing(tmp_path, request):
    # --check-numerics puts its own wrappers around the recorder's: they must be invisible too
    warptrace.start(tmp_path / "run.wtrace", numerics=request.param)
    yield
    warptrace.stop()


@pytest.mark.skipif(
    not hasattr(warp._src.context, "_copy_caller_location"),
    reason="this Warp names no line in the overwrite warning of a copy (no _copy_caller_location: Warp 1.13)",
)
def test_overwrite_warning_names_the_user_line(tracing):
    # Warp's own overwrite tracker walks the stack past warp/_src frames to the caller
    saved = wp.config.verify_autograd_array_access
    wp.config.verify_autograd_array_access = True
    try:
        a = wp.array(np.array([1.0, 2.0, 3.0]), dtype=float, requires_grad=True, device=DEVICE)
        b = wp.zeros_like(a)
        with (
            contextlib.redirect_stderr(io.StringIO()) as err,
            warnings.catch_warnings(record=True) as caught,
            wp.Tape(),
        ):
            warnings.simplefilter("always")
            wp.launch(store_kernel, a.shape, inputs=[a], outputs=[b], device=DEVICE)
            a._is_read = True  # what Warp's access tracking sets when the kernel reads `a`
            line = inspect.currentframe().f_lineno + 1
            wp.copy(a, b)
    finally:
        wp.config.verify_autograd_array_access = saved
    said = err.getvalue() + "".join(str(w.message) for w in caught)
    assert f"written to by an array copy at {__file__}:{line}" in said


def test_alloc_tag_walk_skips_the_wrappers(tracing, monkeypatch):
    # Warp's allocation tracker tags each allocation with the first frame outside its package
    core = warp._src.context.runtime.core
    tags: list[str] = []
    monkeypatch.setattr(core, "wp_alloc_tracker_is_enabled", lambda: True, raising=False)
    monkeypatch.setattr(
        core, "wp_alloc_tracker_set_tag", lambda ptr, tag: tags.append(tag.decode()), raising=False
    )
    line = inspect.currentframe().f_lineno + 1
    wp.zeros(4, dtype=float, device=DEVICE)
    assert tags and all(f"test_record_invisible.py:{line}" in tag for tag in tags), tags


def test_wrapper_frames_keep_their_source(tracing):
    # wrappers that run as Python source; compiled ones (record/native.py) have no frame at all
    from warptrace.record import native

    wrappers = [
        f
        for f in (wp.copy, wp.array.fill_, wp.Tape.backward, wp.Tape.zero)
        if isinstance(f, types.FunctionType)
    ]
    if native.COMPILED:
        # only the --check-numerics layer (record/numerics.py, not compiled) runs as source
        assert all(os.path.basename(f.__code__.co_filename) == "numerics.py" for f in wrappers)
        if not wrappers:
            return
    code = wrappers[0].__code__
    assert code.co_filename.startswith(warp._src.context.__file__.rsplit("context.py", 1)[0])
    # the path resolves to warptrace's file: tracebacks show the wrapper's real source
    assert "state.rec" in "".join(linecache.getlines(code.co_filename))


def test_introspection_sees_the_original(tracing):
    original = wp.launch.__warptrace_original__
    assert wp.launch.__name__ == original.__name__ and wp.launch.__doc__ == original.__doc__
    assert wp.launch.__wrapped__ is original
    assert inspect.signature(wp.launch) == inspect.signature(original)
    assert wp.copy.__qualname__ == wp.copy.__warptrace_original__.__qualname__
