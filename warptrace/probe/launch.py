"""Start the probe runs of ``gradcheck`` and ``bisect --run``: one after another, side by side
(``--jobs N``), or as Ray tasks (``--ray``, :mod:`warptrace.probe.ray_launch`).

The driver (:mod:`warptrace.probe.driver`) decides *which* runs to make and in which order it
needs their results; a launcher only starts them and hands back each result. Every run is a
fresh ``python -m warptrace.probe.child`` process whose config and result are small JSON
files in the driver's folder, so runs are independent by construction and may run at once.

- :class:`SerialLauncher` (``--jobs 1``, the default) starts a run when its result is first
  asked for: exactly the runs, in exactly the order, of a driver that waits for each.
- :class:`LocalLauncher` (``--jobs N``) runs up to N at once, one worker thread per job
  waiting on its process. On a machine with several CUDA devices each worker sees one of
  them (``CUDA_VISIBLE_DEVICES``, round robin), so N jobs use N GPUs.

A run can be pinned to a worker (the driver reruns an unperturbed run on the worker of the
first one to tell a worker mismatch from a program that does not repeat itself) and cancelled
(a speculative run whose result is no longer needed: not started, or its process killed).
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from warptrace.errors import WarptraceError
from warptrace.probe.child import CONFIG_ENV
from warptrace.probe.verdict import RunInfo


class ProbeFailed(WarptraceError):
    """A probe run could not be made (the script failed or diverged)."""


class LaunchError(WarptraceError):
    """The runs cannot be started at all (Ray missing, a cluster unreachable): a usage error."""


@dataclass
class Run:
    """One probe run: its config (``config["result"]`` names the result file) and its fate."""

    name: str
    number: int  # from 1, in the order the driver asked for runs
    config: dict[str, Any]
    config_path: str
    log_path: str
    info: RunInfo
    pin: int | None = None  # the worker that must run it (None: any)
    out: dict[str, Any] | None = None
    error: ProbeFailed | None = None
    worker: int | None = None
    cancelled: bool = False
    started: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    process: subprocess.Popen[bytes] | None = None


def cuda_devices() -> list[str]:
    """The CUDA devices a child process could use, as ``CUDA_VISIBLE_DEVICES`` entries
    (none on a machine without CUDA). Read from the environment when it restricts them, else
    counted by the CUDA driver (``cuDeviceGetCount``, no Warp import in the driver)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        devices = []
        for entry in (part.strip() for part in visible.split(",")):
            if not entry or entry.startswith("-"):
                break  # CUDA ignores the entries from the first invalid one on
            devices.append(entry)
        return devices
    names = ("nvcuda.dll",) if sys.platform == "win32" else ("libcuda.so.1", "libcuda.so")
    for name in names:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        count = ctypes.c_int(0)
        try:
            if lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
                return []
        except AttributeError:
            return []
        return [str(index) for index in range(count.value)]
    return []


def child_command() -> list[str]:
    return [sys.executable, "-m", "warptrace.probe.child"]


def execute(run: Run, env_extra: dict[str, str], timeout: float) -> None:
    """Run ``run`` in a fresh process here and wait; sets ``run.out`` or ``run.error`` and its wall time."""
    with open(run.config_path, "w") as config_file:
        json.dump(run.config, config_file)
    env = dict(os.environ)
    env.update(env_extra)
    env[CONFIG_ENV] = run.config_path
    env.setdefault("PYTHONHASHSEED", "0")  # every run the same set/dict order
    started = time.perf_counter()
    with open(run.log_path, "w") as log:
        process = subprocess.Popen(
            child_command(), env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        run.process = process
        if run.cancelled:  # cancelled while starting: cancel() could not see the process yet
            process.kill()
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            run.info.wall_s = time.perf_counter() - started
            run.error = ProbeFailed(f"probe run '{run.name}' took more than {timeout:.0f} s")
            return
    run.info.wall_s = time.perf_counter() - started
    if run.cancelled:
        return
    try:
        with open(run.config["result"]) as result_file:
            run.out = json.load(result_file)
    except (OSError, ValueError):
        run.error = ProbeFailed(f"probe run '{run.name}' died without a result (log: {run.log_path})")


class Launcher:
    """Starts runs and hands back their results; subclasses decide where and when they run."""

    jobs = 1
    where = ""  # for the report: "2 jobs", "Ray cluster at ..."
    uses_cuda = False  # the recorded program used a CUDA device (set by the driver, :meth:`devices_used`)

    def __init__(self, timeout: float, progress: Callable[[str], None]) -> None:
        self.timeout = timeout
        self.progress = progress
        self.lock = threading.Condition()
        self.submitted: list[Run] = []

    def describe_worker(self, worker: int | None) -> str:
        return "" if worker is None else f"worker {worker + 1}"

    def devices_used(self, devices: set[str]) -> None:
        """The Warp devices the recording run used ("cpu", "cuda:0", ...), before the other runs start."""
        self.uses_cuda = any(device.startswith("cuda") for device in devices)

    def submit(self, run: Run) -> None:
        """Queue ``run`` (it may start at once)."""
        with self.lock:
            self.submitted.append(run)

    def _finish(self, run: Run) -> None:
        """Wait for ``run`` to end (``run.done``); the serial launcher starts it here instead."""
        run.done.wait()

    def result(self, run: Run) -> dict[str, Any]:
        """The run's result (waiting for it); ProbeFailed when it failed or died."""
        self._finish(run)
        if run.cancelled:
            raise ProbeFailed(f"probe run '{run.name}' was cancelled")
        if run.error is not None:
            raise run.error
        assert run.out is not None
        if run.out.get("status") == "failed":
            raise ProbeFailed(f"probe run '{run.name}' failed: {run.out.get('error')} (log: {run.log_path})")
        return run.out

    def cancel(self, runs: list[Run]) -> None:
        """Drop runs whose result is no longer needed: unstarted ones never start, running ones are killed."""
        with self.lock:
            for run in runs:
                if run.done.is_set():
                    continue
                run.cancelled = True
                if not run.started:
                    run.info.status = "cancelled"
                    run.done.set()
                elif run.process is not None:
                    run.process.kill()
            self.lock.notify_all()

    def close(self) -> None:
        """Kill what still runs and stop the workers."""
        self.cancel([run for run in self.submitted if not run.done.is_set()])

    def _report(self, run: Run) -> None:
        if run.cancelled:
            run.info.status = "cancelled"
        elif run.error is not None:
            run.info.status = "died"
        else:
            run.info.status = str((run.out or {}).get("status"))
        run.info.worker = self.describe_worker(run.worker) if self.jobs > 1 else None
        on = f", {run.info.worker}" if run.info.worker else ""
        self.progress(f"run {run.number}: {run.name} {run.info.wall_s:.1f} s ({run.info.status}{on})")


class SerialLauncher(Launcher):
    """One run at a time, started when its result is first asked for."""

    def _finish(self, run: Run) -> None:
        if run.done.is_set():
            return
        run.started = True
        execute(run, {}, self.timeout)
        self._report(run)
        run.done.set()


class LocalLauncher(Launcher):
    """Up to ``jobs`` runs at once on this machine, one worker thread per job."""

    def __init__(self, jobs: int, timeout: float, progress: Callable[[str], None]) -> None:
        super().__init__(timeout, progress)
        self.jobs = jobs
        self.devices = cuda_devices()
        # one CUDA device per worker when there are several (round robin when jobs > devices)
        self.envs: list[dict[str, str]] = [
            {"CUDA_VISIBLE_DEVICES": self.devices[index % len(self.devices)]} if len(self.devices) > 1 else {}
            for index in range(jobs)
        ]
        self.pending: list[Run] = []
        self.closed = False
        self.threads = [
            threading.Thread(target=self._work, args=(index,), daemon=True, name=f"warptrace-probe-{index}")
            for index in range(jobs)
        ]
        for thread in self.threads:
            thread.start()
        self._describe()

    def _describe(self) -> None:
        split = any(self.envs)
        self.where = f"{self.jobs} jobs" + (
            f" on CUDA devices {', '.join(dict.fromkeys(env['CUDA_VISIBLE_DEVICES'] for env in self.envs))}"
            if split
            else ""
        )

    def devices_used(self, devices: set[str]) -> None:
        """A program that names a CUDA device other than the first (``cuda:1``) needs to see them
        all: then every worker sees every device."""
        super().devices_used(devices)
        if any(device.startswith("cuda:") and device != "cuda:0" for device in devices):
            self.envs = [{} for _ in self.envs]
            self._describe()

    def describe_worker(self, worker: int | None) -> str:
        if worker is None:
            return ""
        env = self.envs[worker]
        device = f" (CUDA device {env['CUDA_VISIBLE_DEVICES']})" if env else ""
        return f"worker {worker + 1}{device}"

    def submit(self, run: Run) -> None:
        with self.lock:
            self.submitted.append(run)
            self.pending.append(run)
            self.lock.notify_all()

    def _next(self, worker: int) -> Run | None:
        with self.lock:
            while True:
                if self.closed:
                    return None
                for run in self.pending:
                    if run.pin is None or run.pin == worker:
                        self.pending.remove(run)
                        if run.cancelled:
                            break  # already done; look again
                        run.started = True
                        run.worker = worker
                        return run
                else:
                    self.lock.wait()

    def _work(self, worker: int) -> None:
        while True:
            run = self._next(worker)
            if run is None:
                return
            # the recording sees every device (which ones the program uses is not known yet)
            env = self.envs[worker] if run.config.get("mode") != "record" else {}
            try:
                execute(run, env, self.timeout)
            except OSError as exc:  # the process could not be started
                run.error = ProbeFailed(f"probe run '{run.name}' could not start: {exc}")
            self._report(run)
            run.done.set()

    def cancel(self, runs: list[Run]) -> None:
        with self.lock:
            for run in runs:
                if run in self.pending:
                    self.pending.remove(run)
        super().cancel(runs)

    def close(self) -> None:
        super().close()
        with self.lock:
            self.closed = True
            self.lock.notify_all()
