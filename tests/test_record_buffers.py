"""The recorder's int-only row buffers: what goes in as codes and side entries comes out as written."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import warp as wp

import warptrace
from tests.test_record_common import DEVICE, Trace, store_kernel
from warptrace.record import recorder, session
from warptrace.trace.schema import SCHEMAS


@wp.kernel
def generic_scale_kernel(x: wp.array(dtype=Any), y: wp.array(dtype=Any), s: float):
    i = wp.tid()
    y[i] = x[i] * x.dtype(s)


@pytest.fixture
def trace_path(tmp_path):
    yield tmp_path / "run.wtrace"
    warptrace.stop()


def _small_parts() -> None:
    rec = recorder.active()
    assert rec is not None
    rec.flush_ev_len = 8 * session.EVENT_WIDTH  # many parts: codes and side entries cross flushes


def test_values_details_and_names_survive_many_parts(trace_path):
    warptrace.start(trace_path)
    _small_parts()
    x = wp.array(np.ones(4, dtype=np.float32), dtype=float, device=DEVICE)
    v = wp.array(np.zeros((2, 3), dtype=np.float32), dtype=wp.vec3, device=DEVICE)
    for step in range(6):
        x.fill_(float("nan") if step % 2 else 2.5)
        v.fill_(wp.vec3(1.0, 2.0, 3.0))
        wp.launch(store_kernel, dim=4, inputs=[x], outputs=[x], device=DEVICE)
        wp.launch(store_kernel, dim=[2, 2], inputs=[x], outputs=[x], device=DEVICE)
    warptrace.stop()

    trace = Trace(trace_path)
    memsets = trace.of_kind("memset")
    values = [m["value"] for m in memsets if m["detail"] is None]
    assert len(values) == 6
    assert [math.isnan(value) for value in values] == [False, True] * 3  # NaN is a value, not a null
    assert all(value == 2.5 for value in values[::2])
    vector_fills = [m for m in memsets if m["detail"] is not None]
    assert len(vector_fills) == 6 and all(m["value"] is None for m in vector_fills)
    assert all("vec3" in m["detail"] or "1.0" in m["detail"] for m in vector_fills)
    launches = trace.of_kind("launch")
    assert [e["dim"] for e in launches] == ["4", "2x2"] * 6
    assert all(e["value"] is None and e["detail"] is None for e in launches)
    assert {a["arg"] for e in launches for a in trace.access_rows(e["seq"])} == {"x", "y"}


@pytest.mark.parametrize("writer", ["thread", "process"])
def test_parts_have_the_schema_and_seq_order(trace_path, monkeypatch, writer):
    """Each part is in seq order: the thread writes every small flush as a part, the
    trace-writer process gathers several into one (sorted once)."""
    monkeypatch.setenv("WARPTRACE_WRITER", writer)
    warptrace.start(trace_path)
    _small_parts()
    src = wp.array([1.0, 2.0, 3.0], dtype=float, device=DEVICE, requires_grad=True)
    dest = wp.zeros(3, dtype=float, device=DEVICE, requires_grad=True)
    for _ in range(10):
        with wp.Tape():
            wp.copy(dest, src)  # the outer copy's row follows its nested grad copy's
    warptrace.stop()

    parts = sorted((Path(trace_path) / "events").glob("part-*.parquet"))
    assert len(parts) > 3 if writer == "thread" else parts
    for part in parts:
        table = pq.read_table(part)
        assert table.schema.equals(SCHEMAS["events"])
        seqs = table.column("seq").to_pylist()
        assert seqs == sorted(seqs)
    for part in sorted((Path(trace_path) / "accesses").glob("part-*.parquet")):
        assert pq.read_table(part).schema.equals(SCHEMAS["accesses"])
    trace = Trace(trace_path)
    copies = [c for c in trace.of_kind("copy") if c["tape"] >= 0]  # not wp.array(data)'s copy
    assert len(copies) == 20
    for copy in copies:
        assert sorted(a["arg"] for a in trace.access_rows(copy["seq"])) == ["dest", "src"]


def test_generic_kernel_overloads_keyed_on_the_generic_arguments(trace_path):
    warptrace.start(trace_path)
    x32 = wp.array(np.ones(4, dtype=np.float32), dtype=wp.float32, device=DEVICE)
    y32 = wp.zeros(4, dtype=wp.float32, device=DEVICE)
    x64 = wp.array(np.ones(4, dtype=np.float64), dtype=wp.float64, device=DEVICE)
    y64 = wp.zeros(4, dtype=wp.float64, device=DEVICE)
    wp.launch(generic_scale_kernel, dim=4, inputs=[x32, y32, 2.0], device=DEVICE)
    wp.launch(generic_scale_kernel, dim=4, inputs=[x64, y64, 2.0], device=DEVICE)
    wp.launch(generic_scale_kernel, dim=4, inputs=[x32, y32, 3.0], device=DEVICE)  # s is not generic
    warptrace.stop()

    trace = Trace(trace_path)
    first, second, third = trace.launches("generic_scale_kernel")
    assert first["kernel"] != second["kernel"]
    assert third["kernel"] == first["kernel"]
    for launch in (first, second, third):
        assert trace.access(launch["seq"], "y")["role"] & 2
