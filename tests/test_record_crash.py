"""A run killed with SIGKILL leaves a trace readable up to its last flush."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from warptrace.trace.reader import read_trace

REPO = Path(__file__).resolve().parents[1]

# what every victim script below starts with: a kernel, two arrays, the recorder started
VICTIM_HEAD = textwrap.dedent(
    """
    import signal, sys, time
    import warp as wp
    wp.config.quiet = True
    import warptrace
    from warptrace.record import recorder, session

    @wp.kernel
    def double(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = x[i] * 2.0

    x = wp.zeros(4, dtype=float, device="cpu")
    y = wp.zeros(4, dtype=float, device="cpu")
    warptrace.start(sys.argv[1])
    """
)

SCRIPT = VICTIM_HEAD + textwrap.dedent(
    """
    for _ in range(100):
        wp.launch(double, dim=4, inputs=[x], outputs=[y], device="cpu")
    if sys.argv[2] == "flush":
        recorder.flush()
    print("ready", flush=True)
    time.sleep(120)
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
@pytest.mark.parametrize("how", ["flush", "timer"])
def test_sigkill_leaves_a_readable_partial_trace(tmp_path, how):
    script = tmp_path / "victim.py"  # a real file: Warp reads kernel source from it
    script.write_text(SCRIPT)
    trace = tmp_path / "killed.wtrace"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, str(script), str(trace), how], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        for line in process.stdout:  # Warp may print a banner first
            if line.strip() == "ready":
                break
        else:
            pytest.fail("the script ended before it was ready")
        # "timer": nothing flushed explicitly; the writer thread flushes within ~2 s
        deadline = time.monotonic() + 30
        while not list((trace / "events").glob("part-*.parquet")) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL

    meta = json.loads((trace / "meta.json").read_text())
    assert meta["complete"] is False and meta["exit_status"] is None
    events = ds.dataset(str(trace / "events"), format="parquet").to_table()
    assert events.num_rows == 100
    assert set(events.column("kind").to_pylist()) == {"launch"}
    accesses = ds.dataset(str(trace / "accesses"), format="parquet").to_table()
    assert accesses.num_rows == 200
    arrays = ds.dataset(str(trace / "arrays"), format="parquet").to_table()
    assert set(accesses.column("array_id").to_pylist()) <= set(arrays.column("array_id").to_pylist())
    assert not list(trace.rglob("*.tmp"))
    loaded = read_trace(trace)  # the reader's integrity checks accept a killed run's trace
    assert loaded.tables["events"].num_rows == 100 and not loaded.warnings


def test_a_new_run_clears_what_a_killed_run_left_at_the_same_path(tmp_path):
    """Parts and the temporary file of a part being written (in a required and in an
    optional table) are removed when a new run starts at that path."""
    from warptrace.trace.writer import TraceWriter

    path = tmp_path / "run.wtrace"
    for table in ("events", "numerics"):
        (path / table).mkdir(parents=True)
        (path / table / "part-00000.parquet").write_bytes(b"old")
        (path / table / ".part-00001.parquet.tmp").write_bytes(b"half")
    TraceWriter(path, {"argv": ["again.py"]}).close(exit_status=0)
    assert not (path / "numerics").exists()
    assert list((path / "events").iterdir()) == []
    assert read_trace(path).meta["argv"] == ["again.py"]


HOLDING = VICTIM_HEAD + textwrap.dedent(
    """
    rec = recorder.active()
    rec.flush_ev_len = 50 * session.EVENT_WIDTH  # batches of 50 launches for the writer process
    for _ in range(1000):
        wp.launch(double, dim=4, inputs=[x], outputs=[y], device="cpu")
    deadline = time.monotonic() + 20
    while (rec.sink is None or not rec._queue.empty()) and time.monotonic() < deadline:
        time.sleep(0.01)  # the writer thread has handed every batch to the process
    time.sleep(0.2)
    print("ready", rec.sink.proc.pid, flush=True)
    time.sleep(120)
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_the_writer_process_writes_what_it_holds_when_the_program_is_killed(tmp_path):
    """The trace-writer process gathers batches for up to 2 s before it writes a part: a
    program killed meanwhile still gets every batch it handed over on disk."""
    script = tmp_path / "victim.py"
    script.write_text(HOLDING)
    trace = tmp_path / "killed.wtrace"
    env = {**os.environ, "PYTHONPATH": str(REPO), "WARPTRACE_WRITER": "process"}
    process = subprocess.Popen(
        [sys.executable, str(script), str(trace)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        for line in process.stdout:
            if line.startswith("ready"):
                child = int(line.split()[1])
                break
        else:
            pytest.fail("the script ended before it was ready")
        held = not list((trace / "events").glob("part-*.parquet"))
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the trace-writer process did not end after the program was killed")
    assert held, "the process wrote before the test could kill the program (it should hold ~2 s)"
    loaded = read_trace(trace)
    events = loaded.tables["events"]
    assert events.num_rows == 1000 and not loaded.warnings  # 20 batches of 50, none lost
    assert events.column("seq").to_pylist() == list(range(1000))
    assert json.loads((trace / "meta.json").read_text())["complete"] is False


DEFAULT_SIGPIPE = VICTIM_HEAD + textwrap.dedent(
    """
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # as some command-line programs do
    rec = recorder.active()
    rec.flush_ev_len = 20 * session.EVENT_WIDTH
    for _ in range(100):
        wp.launch(double, dim=4, inputs=[x], outputs=[x], device="cpu")
    recorder.flush()
    rec.sink.proc.kill()
    rec.sink.proc.wait()
    for _ in range(100):  # the next batch meets a broken pipe
        wp.launch(double, dim=4, inputs=[x], outputs=[x], device="cpu")
    warptrace.stop()
    print("survived", flush=True)
    """
)


@pytest.mark.skipif(not hasattr(signal, "SIGPIPE"), reason="needs SIGPIPE")
def test_a_dead_writer_process_does_not_kill_a_program_with_default_sigpipe(tmp_path):
    script = tmp_path / "sigpipe.py"
    script.write_text(DEFAULT_SIGPIPE)
    trace = tmp_path / "run.wtrace"
    env = {**os.environ, "PYTHONPATH": str(REPO), "WARPTRACE_WRITER": "process"}
    done = subprocess.run(
        [sys.executable, str(script), str(trace)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0 and "survived" in done.stdout, (done.returncode, done.stderr[-2000:])
    loaded = read_trace(trace)
    assert loaded.tables["events"].column("seq").to_pylist() == list(range(200)) and not loaded.warnings
