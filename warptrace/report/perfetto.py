"""Chrome trace-event JSON of a run, for the Perfetto UI (ui.perfetto.dev) and chrome://tracing.

- one track per tape (``tape N``) and one for untaped work, in one process named after
  the run; launches, copies, memsets and native utilities are slices (``X`` events) from
  their start to the next event (the trace records when each call started, not when the
  device finished it);
- each ``tape.backward()`` is a slice on its tape's track that contains the adjoint
  launches it ran;
- findings are instant events (``i``) at their overwrite (or first occurrence), and a
  memory finding draws a flow arrow (``s`` -> ``f``) from the launch that read the
  memory to the one that overwrote it;
- ``args`` carry the sequence number, kernel, launch dims, call site, and the arrays
  read and written by label.

Written as a stream, one event per line, so a 1M-launch trace does not build one huge
string in memory.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np

from warptrace.analysis.findings import Finding
from warptrace.analysis.model import K, Model
from warptrace.report.text import display_path
from warptrace.report.views import MEMORY_KINDS, event_name
from warptrace.trace import schema as S

if TYPE_CHECKING:
    from warptrace.progress import Progress

PID = 1
UNTAPED_TID = 1
_ROLES = {S.ROLE_READ: "reads", S.ROLE_WRITE: "writes", S.ROLE_READWRITE: "reads+writes"}


def tid_of_tape(tape_id: int) -> int:
    return tape_id + 2


def write(model: Model, findings: list[Finding], out: TextIO, progress: Progress | None = None) -> int:
    """Write the trace-event JSON of ``model`` to ``out``; returns the number of events written."""
    out.write('{"displayTimeUnit":"ms","traceEvents":[\n')
    count = 0
    for event in _events(model, findings, progress):
        if count:
            out.write(",\n")
        out.write(json.dumps(event, separators=(",", ":"), default=_plain))
        count += 1
    other = {
        "warptrace_trace": str(model.trace.path),
        "warp_version": str(model.meta.get("warp_version") or ""),
    }
    out.write('\n],"otherData":' + json.dumps(other) + "}\n")
    return count


def _events(model: Model, findings: list[Finding], progress: Progress | None) -> Iterator[dict[str, Any]]:
    cwd = model.meta.get("cwd")
    argv = " ".join(str(a) for a in model.meta.get("argv") or []) or "warptrace run"
    yield {"ph": "M", "pid": PID, "name": "process_name", "args": {"name": argv}}
    yield _thread_name(UNTAPED_TID, "untaped")
    for tape_id in model.tapes:
        yield _thread_name(tid_of_tape(tape_id), f"tape {tape_id}")

    n = model.n_events
    if n == 0:
        return
    t_ns = model.trace.tables["events"].column("t_ns")
    times = np.asarray(t_ns.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    if len(times) != n:  # capture replay added events: they take the time of the launch that replays them
        times = _replayed_times(model)
    t0 = int(times.min())
    ts = (times - t0) / 1000.0  # microseconds
    # a slice lasts until the next event starts (never negative: threads interleave)
    next_ts = np.maximum(np.append(ts[1:], ts[-1]), ts)
    taped = (model.tape >= 0) & (model.recorded | (model.phase == S.BACKWARD))
    tids = np.where(taped, model.tape + 2, UNTAPED_TID)
    memory = np.isin(model.kind, [K[k] for k in MEMORY_KINDS])
    labels: dict[int, str] = {}

    begins: dict[int, int] = {}
    for ev in range(n):
        if progress is not None and ev % 50000 == 0:
            progress.update("events", ev, n)
        kind = int(model.kind[ev])
        if kind == K[S.BACKWARD_BEGIN]:
            begins[int(model.tape[ev])] = ev
            continue
        if kind == K[S.BACKWARD_END]:
            start = begins.pop(int(model.tape[ev]), None)
            if start is not None:
                yield _backward_slice(model, start, ev, ts, cwd)
            continue
        if kind in (K[S.TAPE_ZERO], K[S.TAPE_RESET]) and model.tape[ev] >= 0:
            yield {
                "ph": "i", "s": "t", "pid": PID, "tid": tid_of_tape(int(model.tape[ev])),
                "ts": ts[ev], "name": S.EVENT_KINDS[kind].replace("_", "."), "cat": "tape",
                "args": {"seq": int(model.seq[ev]), "site": _site(model, ev, cwd)},
            }  # fmt: skip
            continue
        if not memory[ev]:
            continue
        adjoint = bool(model.adjoint[ev])
        args: dict[str, Any] = {"seq": int(model.seq[ev]), "site": _site(model, ev, cwd)}
        if kind in (K[S.LAUNCH], K[S.CMD_LAUNCH]):
            args["kernel"] = model.kernel_name(ev)
            dim = model._dim[ev].as_py()
            if dim:
                args["dim"] = dim
        args["recorded"] = bool(model.recorded[ev])
        for row in model.accesses_of(ev):
            role = _ROLES.get(int(model.acc_role[row]))
            if role is None:
                continue
            array_id = int(model.acc_array[row])
            label = labels.get(array_id)
            if label is None:
                label = labels[array_id] = model.array_label(array_id, model.acc_arg[row])
            args.setdefault(role, []).append(label)
        yield {
            "ph": "X", "pid": PID, "tid": int(tids[ev]), "ts": ts[ev], "dur": next_ts[ev] - ts[ev],
            "name": ("adj_" if adjoint else "") + event_name(model, ev),
            "cat": "adjoint" if adjoint else ("backward" if model.phase[ev] == S.BACKWARD else S.EVENT_KINDS[kind]),
            "args": args,
        }  # fmt: skip
    yield from _finding_events(model, findings, ts, tids, cwd)


def _thread_name(tid: int, name: str) -> dict[str, Any]:
    return {"ph": "M", "pid": PID, "tid": tid, "name": "thread_name", "args": {"name": name}}


def _backward_slice(model: Model, begin: int, end: int, ts: np.ndarray, cwd: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"seq": int(model.seq[begin]), "site": _site(model, begin, cwd)}
    loss = int(model.array_id[begin])
    if loss >= 0:
        args["loss"] = model.array_label(loss)
    return {
        "ph": "X", "pid": PID, "tid": tid_of_tape(int(model.tape[begin])), "ts": ts[begin],
        "dur": max(ts[end] - ts[begin], 0.0), "name": "tape.backward()", "cat": "backward", "args": args,
    }  # fmt: skip


def _finding_events(
    model: Model, findings: list[Finding], ts: np.ndarray, tids: np.ndarray, cwd: Any
) -> Iterator[dict[str, Any]]:
    flow_id = 0
    for finding in findings:
        evidence = finding.evidence
        name = f"{finding.code} {finding.name}"
        args = {
            "severity": finding.severity.label,
            "message": finding.message,
            "location": f"{display_path(finding.location.file, cwd)}:{finding.location.line}",
            "count": finding.count,
            "fix": finding.fix,
        }
        writes = [_ev(model, seq) for seq in evidence.get("write_seqs") or []]
        reads = [_ev(model, seq) for seq in evidence.get("read_seqs") or []]
        anchor = writes[0] if writes and writes[0] is not None else _ev(model, evidence.get("first_seq"))
        if anchor is None:
            continue
        yield {"ph": "i", "s": "t", "pid": PID, "tid": int(tids[anchor]), "ts": ts[anchor], "name": name,
               "cat": "finding", "args": args}  # fmt: skip
        for read, write in zip(reads, writes):
            if read is None or write is None or read == write:
                continue
            flow_id += 1
            common = {"pid": PID, "name": name, "cat": "finding", "id": flow_id}
            yield {"ph": "s", "tid": int(tids[read]), "ts": ts[read], **common}
            yield {"ph": "f", "bp": "e", "tid": int(tids[write]), "ts": ts[write], **common}


def _ev(model: Model, seq: Any) -> int | None:
    if seq is None:
        return None
    try:
        return model.ev_of_seq(int(seq))
    except KeyError:
        return None


def _replayed_times(model: Model) -> np.ndarray:
    """Per model event, the recorded time of the latest recorded event at or before its seq."""
    events = model.trace.tables["events"]
    seqs = events.column("seq").to_numpy()
    times = events.column("t_ns").fill_null(0).to_numpy(zero_copy_only=False)
    order = np.argsort(seqs, kind="stable")
    index = np.searchsorted(seqs[order], model.seq, side="right") - 1
    return np.asarray(times[order][np.maximum(index, 0)], dtype=np.int64)


def _site(model: Model, ev: int, cwd: Any) -> str:
    loc = model.event_location(ev)
    return f"{display_path(loc.file, cwd)}:{loc.line}" if loc.line else ""


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
