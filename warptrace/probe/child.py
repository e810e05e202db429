"""Entry point of one probe run: ``python -m warptrace.probe.child`` (config in $WARPTRACE_PROBE).

The driver (:mod:`warptrace.probe.driver`) starts this in a fresh process for every
run, so that no state of one run (Warp's kernel caches aside) leaks into the next and
the user's own run is never touched. The config is a JSON file naming the script, its
arguments, the mode and where to write the result:

- ``record``: record the run with warptrace's recorder into ``trace``, stopping at the
  start of backward call number ``backward_cap``, or of ``capture_launch`` call number
  ``backward_cap`` (a graph replay runs a captured backward; the planner needs the first
  windows, not a whole training run);
- ``probe``: run with :class:`~warptrace.probe.hooks.Probe` installed (perturb, read the
  objective and the cut surrogates, optionally compute the adjoints), stopped after the
  last backward of the measured window.

The result JSON always gets ``status`` ("ok", "stopped", "mismatch", "ended", "failed")
and ``wall_s``; the script's own output goes wherever the driver sends it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from warptrace.runner import ScriptRunner

CONFIG_ENV = "WARPTRACE_PROBE"


class _RecordStop(BaseException):
    """Ends a recording run at the backward cap."""


def _record(config: dict[str, Any], runner: ScriptRunner) -> dict[str, Any]:
    import warp
    import warp._src.context as wp_context
    from warp._src.tape import Tape

    import warptrace

    cap = int(config.get("backward_cap", 0))
    warptrace.start(config["trace"], argv=runner.command, script=runner.target)
    patched = Tape.__dict__["backward"]
    calls = [0]

    def backward(tape: Tape, *args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if cap and calls[0] >= cap:
            raise _RecordStop
        return patched(tape, *args, **kwargs)

    Tape.backward = backward  # type: ignore[method-assign, assignment]
    # a replay runs the captured backward again: stop at the same count of capture_launch calls
    launch = getattr(wp_context, "capture_launch", None)
    owners = [
        owner
        for owner in (wp_context, warp)
        if launch is not None and getattr(owner, "capture_launch", None) is launch
    ]
    replays = [0]

    def capture_launch(*args: Any, **kwargs: Any) -> Any:
        replays[0] += 1
        if cap and replays[0] >= cap:
            raise _RecordStop
        assert launch is not None
        return launch(*args, **kwargs)

    for owner in owners:
        owner.capture_launch = capture_launch  # type: ignore[attr-defined]
    try:
        result = runner.run(stop_on=(_RecordStop,))
    finally:
        Tape.backward = patched  # type: ignore[method-assign]
        for owner in owners:
            owner.capture_launch = launch  # type: ignore[attr-defined]
        warptrace.stop(exit_status=0)
    return {
        "status": "stopped" if result.stopped else "ended",
        "exit_status": result.exit_status,
        "error": result.error,
    }


def _probe(config: dict[str, Any], runner: ScriptRunner) -> dict[str, Any]:
    from warptrace.probe.hooks import Probe, ProbeStop

    probe = Probe(config)
    probe.install()
    try:
        result = runner.run(stop_on=(ProbeStop,))
    finally:
        probe.uninstall()
    out = dict(probe.result)
    if out.get("mismatch") is not None:
        out["status"] = "mismatch"
    elif result.stopped:
        out["status"] = "ok"
    else:
        out["status"] = "ended"
        out["exit_status"] = result.exit_status
        out["error"] = result.error
    return out


def main() -> int:
    config_path = os.environ.get(CONFIG_ENV)
    if not config_path:
        sys.stderr.write(
            f"warptrace.probe.child: ${CONFIG_ENV} is not set (this module is run by warptrace)\n"
        )
        return 2
    with open(config_path) as config_file:
        config = json.load(config_file)
    runner = ScriptRunner(config["script"], config.get("args", []), as_module=bool(config.get("module")))
    started = time.perf_counter()
    try:
        runner.prepare()
        if config["mode"] == "record":
            out = _record(config, runner)
        else:
            out = _probe(config, runner)
    except Exception as exc:  # reported by the driver as one line
        out = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
    out["wall_s"] = time.perf_counter() - started
    with open(config["result"], "w") as result_file:
        json.dump(out, result_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
