"""Where the parts are encoded: the trace-writer process, the writer thread, the recording
thread. The three write the same trace; the process is started only by a flush the run's
size or time asked for, and a process that ends on its own loses nothing it had written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import warp as wp

import warptrace
from tests.test_record_common import DEVICE, store_kernel
from warptrace.record import recorder, session
from warptrace.trace import sink as sink_process
from warptrace.trace.reader import read_trace
from warptrace.trace.rows import event_counts_of_parts

REPO = Path(__file__).resolve().parents[1]

# small parts, copies (rows appended out of seq order), memsets with values and details,
# several dims, a tape with backward, value reads, numerics rows
PROGRAM = textwrap.dedent(
    """
    import sys
    import numpy as np
    import warp as wp
    wp.config.quiet = True
    import warptrace
    from warptrace.record import recorder, session

    @wp.kernel
    def scale(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = x[i] * 2.0

    warptrace.start(sys.argv[1], numerics=True)
    recorder.active().flush_ev_len = 8 * session.EVENT_WIDTH
    x = wp.array(np.arange(6, dtype=np.float32), device="cpu", requires_grad=True)
    y = wp.zeros(6, dtype=float, device="cpu", requires_grad=True)
    v = wp.zeros(3, dtype=wp.vec3, device="cpu")
    for step in range(12):
        tape = wp.Tape()
        with tape:
            wp.launch(scale, dim=6, inputs=[x], outputs=[y], device="cpu")
            wp.copy(y, x)
            wp.launch(scale, dim=[2, 3] if step % 2 else 6, inputs=[x], outputs=[y], device="cpu")
        tape.backward(grads={y: wp.ones(6, dtype=float, device="cpu")})
        v.fill_(wp.vec3(1.0, 2.0, float(step)))
        x.fill_(float("nan") if step == 5 else 1.5)
        y.numpy()
        tape.zero()
        wp.launch(scale, dim=6, inputs=[x], outputs=[y], device="cpu")  # untaped (Warp 1.13 makes none)
    warptrace.stop()
    """
)


def _record(tmp_path: Path, mode: str) -> Path:
    script = tmp_path / "program.py"  # a real file: Warp reads kernel source from it
    script.write_text(PROGRAM)
    trace = tmp_path / f"{mode}.wtrace"
    env = {**os.environ, "PYTHONPATH": str(REPO), "WARPTRACE_WRITER": mode}
    env.pop("WARPTRACE_SYNC_WRITES", None)
    subprocess.run([sys.executable, str(script), str(trace)], check=True, env=env, capture_output=True)
    return trace


def _comparable(trace: Path) -> dict[str, list[dict]]:
    loaded = read_trace(trace)
    assert not loaded.warnings
    out = {}
    for name, table in loaded.tables.items():
        drop = [c for c in ("t_ns", "ptr") if c in table.column_names]
        out[name] = [
            {
                key: "nan" if isinstance(value, float) and value != value else value
                for key, value in row.items()
            }
            for row in table.drop_columns(drop).to_pylist()
        ]  # (NaN is a value here: the fill of step 5)
    return out


def test_the_three_writers_write_the_same_trace(tmp_path):
    traces = {mode: _record(tmp_path, mode) for mode in ("process", "thread", "sync")}
    metas = {mode: json.loads((trace / "meta.json").read_text()) for mode, trace in traces.items()}
    assert {mode: meta["writer"] for mode, meta in metas.items()} == {
        "process": "process",
        "thread": "thread",
        "sync": "sync",
    }
    assert all(meta["complete"] and "recorder_errors" not in meta for meta in metas.values())
    tables = {mode: _comparable(trace) for mode, trace in traces.items()}
    assert len(tables["process"]["events"]) > 100 and tables["process"]["numerics"]
    parts = {mode: len(list((trace / "events").glob("part-*.parquet"))) for mode, trace in traces.items()}
    # the recorder flushed many small batches; the process gathered them into fewer parts
    assert parts["thread"] > 5 and parts["sync"] == parts["thread"] and parts["process"] < parts["thread"]
    for name, rows in tables["thread"].items():
        assert tables["process"][name] == rows, name
        assert tables["sync"][name] == rows, name
    assert metas["process"]["counts"] == metas["thread"]["counts"] == metas["sync"]["counts"]
    assert metas["process"]["parts"]["events"] == parts["process"]
    # the summary is counted as the parts are written (by the process, or here): the counts
    # the event parts on disk give
    summaries = {
        mode: {k: v for k, v in meta["summary"].items() if k != "trace"} for mode, meta in metas.items()
    }
    assert summaries["process"] == summaries["thread"] == summaries["sync"]
    on_disk = event_counts_of_parts(traces["process"] / "events")
    for key, kind in (("launches", "launch"), ("copies", "copy"), ("memsets", "memset"), ("tapes", "tape_create"),
                      ("backward_calls", "backward_begin"), ("recorded_launches", "recorded_launches"),
                      ("untaped_launches", "untaped_launches"), ("adjoint_launches", "adjoint_launches")):  # fmt: skip
        assert summaries["process"][key] == on_disk[kind] > 0, key


@pytest.fixture
def trace_path(tmp_path, monkeypatch):
    monkeypatch.setenv("WARPTRACE_WRITER", "process")
    monkeypatch.delenv("WARPTRACE_SYNC_WRITES", raising=False)
    yield tmp_path / "run.wtrace"
    warptrace.stop()


def _launches(x, y, n: int) -> None:
    for _ in range(n):
        wp.launch(store_kernel, dim=4, inputs=[x], outputs=[y], device=DEVICE)


def test_a_short_run_never_starts_the_process(trace_path, monkeypatch):
    """Only a flush before the end starts the child: a run whose rows all fit in memory
    (most tests, short scripts) encodes its parts in process, at stop()."""
    # no timed flush inside the run, however slow a loaded machine makes it
    monkeypatch.setattr(session, "FLUSH_SECONDS", 3600.0)
    warptrace.start(trace_path)
    x = wp.zeros(4, dtype=float, device=DEVICE)
    _launches(x, x, 20)
    recorder.flush()  # an explicit flush does not start it either
    _launches(x, x, 20)
    warptrace.stop()
    meta = json.loads((trace_path / "meta.json").read_text())
    assert meta["writer"] == "thread" and meta["summary"]["launches"] == 40


def test_the_process_ending_on_its_own_loses_nothing_it_wrote(trace_path):
    warptrace.start(trace_path)
    rec = recorder.active()
    rec.flush_ev_len = 8 * session.EVENT_WIDTH
    x = wp.zeros(4, dtype=float, device=DEVICE)
    _launches(x, x, 40)  # size-triggered flushes start the child
    recorder.flush()  # everything so far on disk
    assert rec.sink is not None
    rec.sink.proc.kill()
    rec.sink.proc.wait()
    y = wp.zeros(8, dtype=float, device=DEVICE)  # its arrays and allocs rows go in that batch
    _launches(y, y, 40)  # the next batch finds the pipe broken and is written in process
    warptrace.stop()

    meta = json.loads((trace_path / "meta.json").read_text())
    assert meta["writer"] == "process"
    assert meta["summary"]["recorder_errors"] >= 1
    assert any("trace-writer process ended unexpectedly" in text for text in meta["recorder_errors"])
    loaded = read_trace(trace_path)
    assert not loaded.warnings
    assert loaded.tables["events"].column("seq").to_pylist() == list(range(80))
    assert loaded.tables["arrays"].column("shape").to_pylist() == [[4], [8]]
    # (arrays alive from before start(), such as an earlier test's not yet collected, are
    # external allocations of the trace too)
    owned = [row["nbytes"] for row in loaded.tables["allocs"].to_pylist() if row["kind"] == "owned"]
    assert owned == [16, 32]


def test_the_process_notes_a_value_that_is_not_an_int(trace_path):
    """A recorder bug that puts a non-int into the int rows: the batch goes to the trace-writer
    process as the list it is (not packed), which notes the value and writes -1 for it; the
    batches around it are packed and written whole."""
    warptrace.start(trace_path)
    rec = recorder.active()
    rec.flush_ev_len = 8 * session.EVENT_WIDTH
    x = wp.zeros(4, dtype=float, device=DEVICE)
    _launches(x, x, 20)  # size-triggered flushes start the child
    recorder.flush()
    assert rec.sink is not None
    _launches(x, x, 1)
    with rec.lock:
        assert rec.acc[-1] == rec.name_code("")  # the launch's last access: no struct field
        rec.acc[-1] = "not an int"
    _launches(x, x, 20)
    warptrace.stop()

    meta = json.loads((trace_path / "meta.json").read_text())
    assert meta["writer"] == "process"
    assert meta["summary"]["recorder_errors"] == 1 and meta["summary"]["launches"] == 41
    loaded = read_trace(trace_path)
    assert not loaded.warnings
    assert loaded.tables["events"].column("seq").to_pylist() == list(range(41))
    fields = loaded.tables["accesses"].column("field").to_pylist()
    assert fields.count(None) == 1 and fields.count("") == len(fields) - 1


def test_messages_reach_the_writer_process_whole():
    """What the writer thread sends (a pickle whose large bytes payloads, the packed rows, go
    into the pipe as they are, beside the pickle's own frames) is what the process reads: a
    message larger than the pipe, written while the other end reads, and small ones."""
    import threading

    read_fd, write_fd = os.pipe()
    sender = sink_process.SinkProcess.__new__(sink_process.SinkProcess)
    sender._out = write_fd
    rows = np.arange(3 * (1 << 20), dtype=np.int64).tobytes()  # 24 MiB: many pipe buffers
    batch = (
        ("allocs", [1, "cpu", (16,)] * 5000),
        ("events", (rows, [(3, 1.5, None)])),
        ("accesses", rows[:560]),
    )
    messages = [
        ("attach", "/tmp/x.wtrace", "id", {"events": 0}),
        ("batch", (["launch"], [""], []), batch, False),
        ("sync",),
    ]
    received: list[object] = []
    frames = sink_process._Frames(read_fd)
    reader = threading.Thread(target=lambda: received.extend(frames.next(30) for _ in messages))
    reader.start()
    try:
        for message in messages:
            sender._send(message)
    finally:
        reader.join(60)
        os.close(write_fd)
        os.close(read_fd)
    assert received == messages


def test_an_interpreter_that_cannot_start_the_process_writes_in_process(trace_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", "/opt/app/bin/kit")  # an embedding application
    assert not sink_process.usable()
    warptrace.start(trace_path)
    recorder.active().flush_ev_len = 8 * session.EVENT_WIDTH
    x = wp.zeros(4, dtype=float, device=DEVICE)
    _launches(x, x, 40)
    warptrace.stop()
    meta = json.loads((trace_path / "meta.json").read_text())
    assert meta["writer"] == "thread" and "recorder_errors" not in meta
    assert read_trace(trace_path).tables["events"].num_rows == 40


def test_a_child_that_cannot_start_costs_no_row(trace_path, monkeypatch):
    """The child says it is ready before anything else is sent: one that fails at start
    (here: an interpreter that exits at once) leaves the rows to the writer thread."""
    fake = trace_path.parent / "python3"
    fake.write_text("#!/bin/sh\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake))
    warptrace.start(trace_path)
    recorder.active().flush_ev_len = 8 * session.EVENT_WIDTH
    x = wp.array(np.ones(4, dtype=np.float32), device=DEVICE)
    _launches(x, x, 40)
    warptrace.stop()
    meta = json.loads((trace_path / "meta.json").read_text())
    assert meta["writer"] == "thread" and "exit status 3" in meta["writer_fallback"]
    loaded = read_trace(trace_path)
    assert not loaded.warnings and loaded.tables["events"].num_rows == 41  # the array's copy, 40 launches


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_leaves_the_trace_to_its_parent(trace_path):
    warptrace.start(trace_path)
    recorder.active().flush_ev_len = 8 * session.EVENT_WIDTH
    x = wp.zeros(4, dtype=float, device=DEVICE)
    _launches(x, x, 20)
    pid = os.fork()
    if pid == 0:  # the child records into its copy of the buffers, flushes and stops: no effect
        try:
            _launches(x, x, 20)
            recorder.flush()
            warptrace.stop()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    _launches(x, x, 20)
    warptrace.stop()
    meta = json.loads((trace_path / "meta.json").read_text())
    assert meta["summary"]["launches"] == 40 and meta["complete"]
    assert read_trace(trace_path).tables["events"].column("seq").to_pylist() == list(range(40))


@pytest.mark.parametrize("mode", ["process", "thread"])
def test_a_program_that_changes_its_directory_keeps_one_trace(tmp_path, monkeypatch, mode):
    monkeypatch.setenv("WARPTRACE_WRITER", mode)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    warptrace.start("relative.wtrace")
    try:
        recorder.active().flush_ev_len = 8 * session.EVENT_WIDTH
        x = wp.zeros(4, dtype=float, device=DEVICE)
        _launches(x, x, 20)
        os.chdir(tmp_path / "elsewhere")  # (monkeypatch.chdir restores the first one)
        _launches(x, x, 20)
    finally:
        assert warptrace.stop() == "relative.wtrace"
    assert not (tmp_path / "elsewhere" / "relative.wtrace").exists()
    meta = json.loads((tmp_path / "relative.wtrace" / "meta.json").read_text())
    assert meta["complete"] and meta["writer"] == mode
    assert read_trace(tmp_path / "relative.wtrace").tables["events"].column("seq").to_pylist() == list(
        range(40)
    )


def test_a_module_beside_the_program_does_not_shadow_the_writer_process(tmp_path, monkeypatch):
    """The child runs in the trace folder with -P: a json.py in the program's working
    directory (first on the child's path otherwise) is not what it imports."""
    monkeypatch.setenv("WARPTRACE_WRITER", "process")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "json.py").write_text("raise SystemExit('the wrong json')\n")
    warptrace.start(tmp_path / "run.wtrace")
    try:
        rec = recorder.active()
        rec.flush_ev_len = 8 * session.EVENT_WIDTH
        x = wp.zeros(4, dtype=float, device=DEVICE)
        _launches(x, x, 40)
    finally:
        warptrace.stop()
    meta = json.loads((tmp_path / "run.wtrace" / "meta.json").read_text())
    assert meta["writer"] == "process" and "recorder_errors" not in meta
