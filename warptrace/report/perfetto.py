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
import pyarrow as pa

from warptrace.analysis.findings import Finding
from warptrace.analysis.model import K, Model
from warptrace.report.text import file_line
from warptrace.report.views import MEMORY_KINDS
from warptrace.trace import schema as S

if TYPE_CHECKING:
    from warptrace.progress import Progress

PID = 1
CHUNK = 65536  # events turned into Python lists at a time
UNTAPED_TID = 1


def tid_of_tape(tape_id: int) -> int:
    return tape_id + 2


def write(model: Model, findings: list[Finding], out: TextIO, progress: Progress | None = None) -> int:
    """Write the trace-event JSON of ``model`` to ``out``; returns the number of events written."""
    out.write('{"displayTimeUnit":"ms","traceEvents":[\n')
    count = 0
    for event in _events(model, findings, progress):
        if count:
            out.write(",\n")
        out.write(
            event if isinstance(event, str) else json.dumps(event, separators=(",", ":"), default=_plain)
        )
        count += 1
    other = {
        "warptrace_trace": str(model.trace.path),
        "warp_version": str(model.meta.get("warp_version") or ""),
    }
    out.write('\n],"otherData":' + json.dumps(other) + "}\n")
    return count


def _events(
    model: Model, findings: list[Finding], progress: Progress | None
) -> Iterator[dict[str, Any] | str]:
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
    tape_marks = np.isin(
        model.kind, [K[S.BACKWARD_BEGIN], K[S.BACKWARD_END], K[S.TAPE_ZERO], K[S.TAPE_RESET]]
    )
    names = _Names(model, cwd)
    begins: dict[int, int] = {}
    # Chunks of plain Python lists: indexing numpy scalars per event costs more than the JSON.
    for lo in range(0, n, CHUNK):
        hi = min(n, lo + CHUNK)
        if progress is not None:
            progress.update("writing events", lo, n)
        for ev in (lo + np.flatnonzero(tape_marks[lo:hi])).tolist():
            kind = int(model.kind[ev])
            if kind == K[S.BACKWARD_BEGIN]:
                begins[int(model.tape[ev])] = ev
            elif kind == K[S.BACKWARD_END]:
                start = begins.pop(int(model.tape[ev]), None)
                if start is not None:
                    yield _backward_slice(model, start, ev, ts, cwd)
            elif model.tape[ev] >= 0:
                yield {
                    "ph": "i", "s": "t", "pid": PID, "tid": tid_of_tape(int(model.tape[ev])),
                    "ts": ts[ev], "name": S.EVENT_KINDS[kind].replace("_", "."), "cat": "tape",
                    "args": {"seq": int(model.seq[ev]), "site": _site(model, ev, cwd)},
                }  # fmt: skip
        evs = lo + np.flatnonzero(memory[lo:hi])
        if not len(evs):
            continue
        yield from _slices(model, evs, ts, next_ts, tids, names)
    # flows bind to the slice open at their timestamp: point them at the middle of the slice
    yield from _finding_events(model, findings, (ts + next_ts) / 2, tids, cwd)


class _Names:
    """JSON-encoded names, sites and labels, each encoded once."""

    def __init__(self, model: Model, cwd: Any) -> None:
        self.model = model
        self.cwd = cwd
        self.sites: dict[int, str] = {}
        self.kernels: dict[int, str] = {}
        self.labels: dict[tuple[int, str], str] = {}
        self.dims: list[str | None] = []

    def site(self, site_id: int) -> str:
        text = self.sites.get(site_id)
        if text is None:
            loc = self.model.location(site_id)
            where = file_line(loc.file, loc.line, self.cwd, blank_unknown=True)
            text = self.sites[site_id] = json.dumps(where)
        return text

    def kernel(self, kernel_id: int) -> str:
        text = self.kernels.get(kernel_id)
        if text is None:
            kernel = self.model.kernels.get(kernel_id)
            text = self.kernels[kernel_id] = json.dumps(kernel.key if kernel else "?")
        return text

    def label(self, array_id: int, arg: str) -> str:
        text = self.labels.get((array_id, arg))
        if text is None:
            text = self.labels[(array_id, arg)] = json.dumps(self.model.array_label(array_id, arg))
        return text


def _slices(
    model: Model, evs: np.ndarray, ts: np.ndarray, next_ts: np.ndarray, tids: np.ndarray, names: _Names
) -> Iterator[str]:
    """The ``X`` events of memory effects, as JSON text (built by hand: this is the hot loop)."""
    kinds = model.kind[evs].tolist()
    adjoint = model.adjoint[evs].tolist()
    backward = (model.phase[evs] == S.BACKWARD).tolist()
    recorded = model.recorded[evs].tolist()
    sites = model.site[evs].tolist()
    kernels = model.kernel[evs].tolist()
    seqs = model.seq[evs].tolist()
    starts = ts[evs].tolist()
    durations = (next_ts[evs] - ts[evs]).tolist()
    thread = tids[evs].tolist()
    dims = model._dim.take(pa.array(evs)).to_pylist()
    row_lo, row_hi = int(model.acc_start[evs[0]]), int(model.acc_stop[evs[-1]])
    first = (model.acc_start[evs] - row_lo).tolist()
    last = (model.acc_stop[evs] - row_lo).tolist()
    roles = model.acc_role[row_lo:row_hi].tolist()
    arrays = model.acc_array[row_lo:row_hi].tolist()
    args = model.acc_arg[row_lo:row_hi].tolist()
    launch_kinds = (K[S.LAUNCH], K[S.CMD_LAUNCH])
    kind_names = [json.dumps(kind) for kind in S.EVENT_KINDS]
    for i in range(len(kinds)):
        kind = kinds[i]
        reads, writes, both = [], [], []
        for row in range(first[i], last[i]):
            role = roles[row]
            if role == S.ROLE_READ:
                reads.append(names.label(arrays[row], args[row]))
            elif role == S.ROLE_WRITE:
                writes.append(names.label(arrays[row], args[row]))
            elif role == S.ROLE_READWRITE:
                both.append(names.label(arrays[row], args[row]))
        if kind in launch_kinds:
            name = names.kernel(kernels[i])
            extra = f',"kernel":{name}' + (f',"dim":{json.dumps(dims[i])}' if dims[i] else "")
        else:
            name, extra = kind_names[kind], ""
        if adjoint[i]:
            name, cat = '"adj_' + name[1:], '"adjoint"'
        else:
            cat = '"backward"' if backward[i] else kind_names[kind]
        roles_json = "".join(
            f',"{key}":[{",".join(values)}]'
            for key, values in (("reads", reads), ("writes", writes), ("reads+writes", both))
            if values
        )
        yield (
            f'{{"ph":"X","pid":{PID},"tid":{thread[i]},"ts":{starts[i]:.3f},"dur":{durations[i]:.3f},'
            f'"name":{name},"cat":{cat},"args":{{"seq":{seqs[i]},"site":{names.site(sites[i])}{extra},'
            f'"recorded":{"true" if recorded[i] else "false"}{roles_json}}}}}'
        )


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
    """Instants and flows; ``ts`` is a time inside each event's slice."""
    flow_id = 0
    for finding in findings:
        evidence = finding.evidence
        name = f"{finding.code} {finding.name}"
        args = {
            "severity": finding.severity.label,
            "message": finding.message,
            "location": file_line(finding.location.file, finding.location.line, cwd),
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
    return file_line(loc.file, loc.line, cwd, blank_unknown=True)


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
