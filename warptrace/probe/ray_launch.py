"""``--ray [ADDRESS]``: the probe runs as Ray tasks (``pip install warptrace[ray]``).

Ray schedules independent tasks over a cluster's CPUs and GPUs; warptrace asks it for one
task per probe run and builds no scheduler of its own. Each task:

- runs in a copy of the directory ``gradcheck`` was started from (Ray's ``runtime_env``
  ``working_dir``: the script, its modules and data files), on a node whose Python has
  warptrace and Warp installed;
- requests one GPU when the recorded program launched on a CUDA device (Ray then sets the
  task's ``CUDA_VISIBLE_DEVICES``);
- runs ``python -m warptrace.probe.child`` there exactly as a local run does, with the paths
  of the config mapped from this directory to the task's copy (and back in the result), the
  files a run reads (the reference seeds) sent with it and those it writes sent back.

The recording run stays on this machine (the planner reads its trace here, with this
machine's paths). Ray missing, or a cluster that cannot be reached, is a one-line
:class:`~warptrace.probe.launch.LaunchError` before any run.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from warptrace.probe.launch import Launcher, LaunchError, ProbeFailed, Run, SerialLauncher, execute
from warptrace.probe.verdict import RunInfo

# config keys naming files a run reads (sent with the task) or writes (sent back)
INPUT_FILES = ("seed_in",)
OUTPUT_FILES = ("seed_out", "trace")


def _map_paths(value: Any, old: str, new: str) -> Any:
    """``value`` with every string under directory ``old`` moved under ``new``."""
    if isinstance(value, str):
        if value == old or value.startswith(old.rstrip(os.sep) + os.sep):
            return new + value[len(old) :]
        return value
    if isinstance(value, list):
        return [_map_paths(item, old, new) for item in value]
    if isinstance(value, dict):
        return {key: _map_paths(item, old, new) for key, item in value.items()}
    return value


def remote_run(task: dict[str, Any]) -> dict[str, Any]:
    """The body of one Ray task: one probe run in the task's copy of the working directory."""
    import socket

    here = os.getcwd()  # Ray's copy of the driver's working directory
    config = _map_paths(task["config"], task["root"], here)
    scratch = tempfile.mkdtemp(prefix="warptrace-probe-task-")
    for key in INPUT_FILES:
        if config.get(key):
            path = os.path.join(scratch, key)
            if key in task["files"]:
                with open(path, "wb") as handle:
                    handle.write(task["files"][key])
            config[key] = path
    for key in OUTPUT_FILES:
        if config.get(key):
            config[key] = os.path.join(scratch, key)
    config["result"] = os.path.join(scratch, "result.json")
    run = Run(
        name=task["name"],
        number=0,
        config=config,
        config_path=os.path.join(scratch, "config.json"),
        log_path=os.path.join(scratch, "run.log"),
        info=RunInfo(task["name"], 0.0, "running"),
    )
    execute(run, {}, float(task["timeout"]))
    files = {}
    for key in OUTPUT_FILES:
        path = config.get(key)
        if path and os.path.exists(path):
            with open(path, "rb") as handle:
                files[key] = handle.read()
    with open(run.log_path, "rb") as handle:
        log = handle.read()[-1_000_000:]
    return {
        "out": _map_paths(run.out, here, task["root"]) if run.out is not None else None,
        "error": str(run.error) if run.error is not None else None,
        "wall_s": run.info.wall_s,
        "files": files,
        "log": log,
        "node": socket.gethostname(),
        "node_id": _node_id(),
    }


def _node_id() -> str | None:
    try:
        import ray

        return str(ray.get_runtime_context().get_node_id())
    except Exception:  # outside a Ray worker
        return None


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """A ``host:port`` (or ``ray://host:port``) address must accept a connection: Ray's own
    client retries an unreachable one for minutes."""
    import socket

    rest = address.split("://", 1)[-1]
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return  # "auto" and the like: Ray answers those at once
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise LaunchError(
            f"cannot reach the Ray cluster at {address}: {exc.strerror or type(exc).__name__}"
        ) from None


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise LaunchError(
            "--ray needs the ray package on this machine and the cluster's (pip install 'warptrace[ray]')"
        ) from None
    return ray


class RayLauncher(Launcher):
    """Every run but the recording as a Ray task; the recording here (its trace is planned here)."""

    jobs = 2  # several at once: the driver asks for runs ahead

    def __init__(self, address: str, timeout: float, progress: Callable[[str], None]) -> None:
        super().__init__(timeout, progress)
        ray = import_ray()
        self.ray = ray
        self.root = os.getcwd()
        # the working directory goes with the job (Ray uploads a directory at the job level only);
        # a process already connected to Ray (the Python API) keeps its job's own runtime_env
        self.joined = ray.is_initialized()
        if address and not self.joined:
            check_reachable(address)
        try:
            if not self.joined:
                ray.init(
                    address=address or None,
                    runtime_env={"working_dir": self.root},
                    logging_level="ERROR",
                    log_to_driver=False,
                )
            resources = ray.cluster_resources()
        except Exception as exc:  # ConnectionError, RuntimeError, ValueError, ...: Ray's own
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise LaunchError(
                f"cannot use the Ray cluster at {address or 'the default address (ray.init())'}: {first}"
            ) from None
        self.gpus = float(resources.get("GPU", 0.0))
        self.where = f"Ray cluster ({int(resources.get('CPU', 0))} CPUs, {self.gpus:g} GPUs)"
        self.local = SerialLauncher(timeout, progress)
        self.remote = ray.remote(remote_run)
        self.nodes: list[str] = []  # node ids, in the order runs first landed there (worker indices)
        self.node_names: list[str] = []
        self.tasks: dict[int, Any] = {}  # id(run) -> ObjectRef

    def describe_worker(self, worker: int | None) -> str:
        return "" if worker is None else f"Ray node {worker + 1} ({self.node_names[worker]})"

    def submit(self, run: Run) -> None:
        if run.config.get("mode") == "record":
            self.local.submit(run)
            return
        with self.lock:
            self.submitted.append(run)
        files = {}
        for key in INPUT_FILES:
            path = run.config.get(key)
            if path and os.path.exists(path):
                with open(path, "rb") as handle:
                    files[key] = handle.read()
        task = {
            "name": run.name,
            "config": run.config,
            "root": self.root,
            "files": files,
            "timeout": self.timeout,
        }
        options: dict[str, Any] = {
            "num_gpus": 1 if self.uses_cuda and self.gpus else 0,
            "max_retries": 0,
        }
        if run.pin is not None and run.pin < len(self.nodes):
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(self.nodes[run.pin], soft=False)
        self.tasks[id(run)] = self.remote.options(**options).remote(task)
        run.started = True
        run.info.status = "running"
        started = time.perf_counter()
        threading.Thread(target=self._wait, args=(run, started), daemon=True).start()

    def _wait(self, run: Run, started: float) -> None:
        ref = self.tasks[id(run)]
        try:
            answer = self.ray.get(ref, timeout=self.timeout + 60.0)
        except Exception as exc:
            if not run.cancelled:
                kind = type(exc).__name__
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else kind
                run.error = ProbeFailed(f"probe run '{run.name}' failed as a Ray task: {first}")
            run.info.wall_s = time.perf_counter() - started
        else:
            run.info.wall_s = float(answer["wall_s"])
            with open(run.log_path, "wb") as handle:
                handle.write(answer["log"])
            for key, data in answer["files"].items():
                with open(run.config[key], "wb") as handle:
                    handle.write(data)
            if answer["error"]:
                run.error = ProbeFailed(answer["error"].replace("(log: ", f"(log: {run.log_path}; remote: "))
            run.out = answer["out"]
            with self.lock:
                if answer["node_id"] not in self.nodes:
                    self.nodes.append(answer["node_id"])
                    self.node_names.append(answer["node"])
                run.worker = self.nodes.index(answer["node_id"])
        self._report(run)
        run.done.set()

    def _finish(self, run: Run) -> None:
        if run.config.get("mode") == "record":
            self.local._finish(run)
            return
        run.done.wait()

    def close(self) -> None:
        super().close()
        if not self.joined:
            self.ray.shutdown()

    def cancel(self, runs: list[Run]) -> None:
        for run in runs:
            ref = self.tasks.get(id(run))
            if ref is not None and not run.done.is_set():
                run.cancelled = True
                with contextlib.suppress(Exception):  # already finished
                    self.ray.cancel(ref, force=True)
        super().cancel(runs)
