"""Drive the probe runs of ``gradcheck`` and ``bisect --run`` and turn them into a result.

Every run is a fresh ``python -m warptrace.probe.child`` process (the user's own run is
never altered; no state leaks between runs). For a plan of C cuts and E eps values:

1. one *recording* run (warptrace's recorder, stopped a few backward calls in) gives
   the launch graph: parameters, backward window, tape positions, cuts;
2. two *unperturbed* runs: the first reads the objective, every cut's surrogate, the
   gradient the program computes and each cut's autodiff value; the second only reads
   values (the program must repeat itself, or nothing can be concluded);
3. two *perturbed* runs per eps (``+h`` and ``-h``) read the objective and every cut's
   surrogate at once.

So ``3 + 2E`` runs whatever C is (9 with the default 3 eps). Each run's wall time is
reported.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from warptrace.analysis.bisect import MAX_CUTS, Cut, make_plan
from warptrace.analysis.graphs import has_replays, probe_coordinates, replay_problem
from warptrace.analysis.measure import measurement, unexercised
from warptrace.analysis.model import Model
from warptrace.analysis.report import analyze_model, build_model
from warptrace.errors import WarptraceError
from warptrace.probe.child import CONFIG_ENV
from warptrace.probe.verdict import (
    DEFAULT_RTOL,
    NOISE_ULPS,
    CutResult,
    Result,
    RunInfo,
    combine,
    compare,
    float32_resolution,
)
from warptrace.trace.reader import read_trace

DEFAULT_EPS = (1e-2, 1e-3, 1e-4)
DEFAULT_SEED = 20240531
RUN_TIMEOUT_S = 600.0
MAX_UNSEEN_CLEARS = 4  # measurements redone after a probe run saw a gradient cleared out of sight
REFINE_ROUNDS = 2  # extra rounds of probe runs inside the bracket when a plan has more than MAX_CUTS cuts


@dataclass
class Options:
    script: str
    args: list[str]
    as_module: bool = False
    at: tuple[int | str, ...] | None = None  # the reads to measure (None: the default one)
    params: list[str] | None = None
    eps: tuple[float, ...] = DEFAULT_EPS
    rtol: float = DEFAULT_RTOL
    seed: int = DEFAULT_SEED
    cuts: bool = False  # bisect --run: measure the cuts too
    timeout: float = RUN_TIMEOUT_S


class ProbeFailed(WarptraceError):
    """A probe run could not be made (the script failed or diverged)."""


class Driver:
    def __init__(self, options: Options, progress: Callable[[str], None] | None = None) -> None:
        self.options = options
        self.progress = progress or (lambda line: None)
        self.workdir = tempfile.mkdtemp(prefix="warptrace-probe-")
        self.runs: list[RunInfo] = []
        self.sweep: list[float] = []
        self.base: dict[str, Any] = {}
        self.failure: str | None = None
        self.prefix = ""  # of run names, per read measured (--at first,last)
        self.plain: Model | None = None  # the trace as recorded (the model itself without capture)
        # array_id -> backward seqs after which another framework cleared its gradient (seen in a probe run)
        self.unseen_clears: dict[int, list[int]] = {}

    def cleanup(self) -> None:
        """Remove the runs' folder (the recording, configs, results and logs)."""
        shutil.rmtree(self.workdir, ignore_errors=True)

    # ------------------------------------------------------------------ runs

    def _child(self, name: str, config: dict[str, Any]) -> dict[str, Any]:
        config = {
            "script": self.options.script,
            "args": self.options.args,
            "module": self.options.as_module,
            **config,
        }
        name = self.prefix + name
        file_name = f"run{len(self.runs) + 1}"
        config["result"] = os.path.join(self.workdir, f"{file_name}.json")
        config_path = os.path.join(self.workdir, f"{file_name}.config.json")
        with open(config_path, "w") as config_file:
            json.dump(config, config_file)
        env = dict(os.environ)
        env[CONFIG_ENV] = config_path
        env.setdefault("PYTHONHASHSEED", "0")  # every run the same set/dict order
        log_path = os.path.join(self.workdir, f"{file_name}.log")
        started = time.perf_counter()
        with open(log_path, "w") as log:
            try:
                subprocess.run(
                    [sys.executable, "-m", "warptrace.probe.child"],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    timeout=self.options.timeout,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                raise ProbeFailed(f"probe run '{name}' took more than {self.options.timeout:.0f} s") from None
        wall = time.perf_counter() - started
        try:
            with open(config["result"]) as result_file:
                out: dict[str, Any] = json.load(result_file)
        except (OSError, ValueError):
            raise ProbeFailed(f"probe run '{name}' died without a result (log: {log_path})") from None
        self.runs.append(RunInfo(name, wall, str(out.get("status"))))
        self.progress(f"run {len(self.runs)}: {name} {wall:.1f} s ({out.get('status')})")
        if out.get("status") == "failed":
            raise ProbeFailed(f"probe run '{name}' failed: {out.get('error')} (log: {log_path})")
        return out

    # ------------------------------------------------------------------ main

    def run(self) -> Result:
        options = self.options
        trace_path = os.path.join(self.workdir, "record.wtrace")
        recorded = self._child(
            "record", {"mode": "record", "trace": trace_path, "backward_cap": record_cap(options.at)}
        )
        trace = read_trace(trace_path)
        # the model of the analysis: graph captures replayed where they ran (a replay is a
        # recording of its own); the trace as recorded tells where a probe run meets each one
        model = build_model(trace)
        report = analyze_model(model)
        self.plain = Model(trace) if has_replays(model) else model
        specs: tuple[int | str | None, ...] = options.at or (None,)
        results = []
        for spec in specs:
            prefix = f"read {spec}: " if len(specs) > 1 else ""
            result = self._measure(model, report.findings, spec, prefix)
            if recorded.get("status") == "ended" and recorded.get("exit_status"):
                failed = f"the recorded run ended with exit status {recorded['exit_status']}"
                if recorded.get("error"):
                    failed += f" ({recorded['error']})"
                if result.measurement is not None and not result.measurement.window:
                    result.reason = f"{failed} before any gradient could be measured"
                else:
                    result.notes.insert(0, failed)
            results.append(result)
        return results[0] if len(results) == 1 else combine(results)

    def _measure(self, model: Model, findings: list[Any], at: int | str | None, prefix: str) -> Result:
        """One read's measurement (and its bisection with ``cuts``)."""
        options = self.options
        self.prefix = prefix
        self.failure = None
        result = Result(
            "undecided",
            runs=self.runs,
            findings=findings,
            seed=options.seed,
            rtol=options.rtol,
            cwd=os.getcwd(),
        )
        chosen = measurement(model, at, options.params, self.unseen_clears)
        result.measurement = chosen
        result.notes += chosen.notes
        if chosen.undecided:
            result.reason = chosen.undecided
            return result

        assert self.plain is not None
        coords, problem = probe_coordinates(self.plain, model, chosen.window)
        replayed = any(c.forward_replay for c in coords.values())
        if problem is None and replayed:
            problem = replay_problem(
                model,
                chosen.window,
                [(p.array_id, p.backward, p.position) for p in chosen.params],
                [(r.loss_array, r.backward, False) for r in chosen.window if r.loss_array >= 0]
                + [(seed.array_id, seed.backward, seed.constant is None) for seed in chosen.seeds],
            )
        if problem is not None:
            result.reason = problem
            return result
        if replayed:
            begin_at, end_at = coords[chosen.window[0].backward], coords[chosen.window[-1].backward]
            result.notes.append(
                "measured through graph replays: the parameters are perturbed just before capture_launch call "
                f"{begin_at.forward_replay}, "
                + (
                    f"the objective and gradient read just after capture_launch call {end_at.replay}"
                    if end_at.replay
                    else "the objective and gradient read at the eager backward that follows"
                )
            )

        # cut the recording that reads a parameter first: its surrogates see every perturbation
        first_read = min(chosen.params, key=lambda p: p.first_read_seq)
        cut_recording = next(r for r in chosen.window if r.backward == first_read.backward)
        cut_at = coords[cut_recording.backward]
        cuts: list[Cut] = []
        if options.cuts:
            result.plan = make_plan(model, cut_recording, findings)
            cuts = [cut for cut in result.plan.cuts if cut.live][:MAX_CUTS]
        self.sweep = [float(eps) for eps in options.eps]
        seed_file = os.path.join(self.workdir, f"seeds-{len(self.runs)}.npz")

        def eager(numbers: list[int]) -> list[int]:
            return [coords[n].backward for n in numbers if n in coords and not coords[n].replay]

        self.base = {
            "mode": "probe",
            "seed": options.seed,
            "window": eager(chosen.backwards),
            "replays": [
                {"replay": c.replay, "backward": c.backward, "tape": c.tape_ordinal, "epoch": c.epoch}
                for c in (coords[n] for n in chosen.backwards)
                if c.replay
            ],
            "target": {
                "tape": cut_at.tape_ordinal,
                "epoch": cut_at.epoch,
                "n_events": len(cut_recording.events),
                "replay": cut_at.forward_replay,
            },
            "cut_backward": cut_at.backward,
            "params": [
                {
                    "label": p.label,
                    "tape": coords[p.backward].tape_ordinal,
                    "epoch": coords[p.backward].epoch,
                    "position": p.position,
                    "arg": p.arg,
                    "field": p.field,
                    "window": eager(p.window),
                    "replay": coords[p.backward].forward_replay,
                    "backward": coords[p.backward].backward,
                    "role": None
                    if p.role is None
                    else {
                        "file": p.role.file,
                        "line": p.role.line,
                        "ordinal": p.role.ordinal,
                        "shape": list(p.role.shape),
                    },
                }
                for p in chosen.params
            ],
            "seeds": [
                {
                    # the objective term it belongs to: a backward call, or (-n) the n-th capture_launch
                    "backward": -coords[seed.backward].replay
                    if coords[seed.backward].replay
                    else coords[seed.backward].backward,
                    "label": seed.label,
                    "tape": coords[seed.backward].tape_ordinal,
                    "epoch": coords[seed.backward].epoch,
                    "position": seed.position,
                    "arg": seed.arg,
                    "field": seed.field,
                    # a replay's backward may consume the seed before it is read: a constant is known
                    "constant": seed.constant if coords[seed.backward].replay else None,
                }
                for seed in chosen.seeds
            ],
            "seed_in": seed_file,
            "sweep": self.sweep,
        }
        first = self._child(
            "unperturbed-1", {**self._config(cuts, 0.0, ad=True), "seed_in": None, "seed_out": seed_file}
        )
        unseen = first.get("unseen_clear")
        if unseen is not None and len(self.unseen_clears) < MAX_UNSEEN_CLEARS:
            # another framework zeroed a shared gradient between two backward calls: measure again
            # with that clear, so the read's window is what the program really reads
            param = chosen.params[int(unseen["param"])]
            after = next(r for r in chosen.window if r.backward == int(unseen["after"]))
            self.unseen_clears.setdefault(param.array_id, []).append(after.backward_seq)
            note = (
                f"the gradient of {param.label} is cleared between backward {unseen['after']} and "
                f"{unseen['before']} where the recording cannot see it (memory shared with another framework); "
                "seen in a probe run and taken into account"
            )
            remeasured = self._measure(model, findings, at, prefix)
            if note not in remeasured.notes:
                remeasured.notes.append(note)
            return remeasured
        second = self._child("unperturbed-2", self._config(cuts, 0.0, ad=False))
        for run in (first, second):
            if run.get("status") != "ok":
                result.reason = _not_ok(run)
                return result
        for note in first.get("notes") or []:
            if note not in result.notes:
                result.notes.append(note)
        objective = _objective(first)
        if objective is None:
            result.reason = "a backward in the window has nothing to difference (no loss= and no seed)"
            return result
        result.objective = objective
        if first.get("seed_digest") != second.get("seed_digest"):
            result.reason = (
                "the hand seed's values differ between two unperturbed runs (a seed from outside the process "
                "or an unseeded random number generator): finite differences need a repeatable objective"
            )
            return result
        other = _objective(second)
        jitter = abs(objective - other) if other is not None else 0.0
        resolution = float(sum(first.get("objective_resolution") or [])) or float32_resolution(
            [v for v in first["objective"] if v is not None]
        )
        result.jitter = jitter
        result.deterministic = jitter == 0.0 and first["surrogates"] == second["surrogates"]
        if jitter > NOISE_ULPS * resolution:
            result.reason = (
                f"the program is not deterministic: two unperturbed runs give objectives {objective!r} and "
                f"{other!r} (seed every random number generator; finite differences need a repeatable run)"
            )
            return result
        if jitter > 0:
            result.notes.append(
                f"two unperturbed runs differ by {jitter:.3g} in the objective (within its resolution)"
            )
        perturbed = self._perturbed_runs(cuts, "")
        if perturbed is None:
            result.reason = self.failure
            return result

        ad = first.get("ad") or {}
        points = []
        one_sided = []
        for eps in self.sweep:
            plus, minus = perturbed[eps]
            high, low = _objective(plus) or 0.0, _objective(minus) or 0.0
            points.append((eps, high - low, 2.0 * eps * float(ad.get(str(eps), 0.0)), 2.0 * eps))
            one_sided.append((high - objective, objective - low))
        result.end_to_end = compare(points, resolution, jitter, options.rtol, one_sided)
        result.cuts = self._cut_results(cuts, first, second, perturbed)
        measured = {cut.k for cut in cuts}
        for round_number in range(2, 2 + REFINE_ROUNDS):
            bracket = _bracket(result.cuts)
            if bracket is None or result.plan is None:
                break
            low, high = bracket
            inside = [c for c in result.plan.cuts if low < c.k < high and c.live and c.k not in measured]
            if not inside:
                break
            refine = inside[:MAX_CUTS]
            measured |= {cut.k for cut in refine}
            again = self._child(f"round{round_number}-unperturbed", self._config(refine, 0.0, ad=True))
            runs = self._perturbed_runs(refine, f"round{round_number}-")
            if again.get("status") != "ok" or runs is None:
                result.notes.append(
                    f"refinement round {round_number} failed: {self.failure or _not_ok(again)}"
                )
                break
            result.cuts += self._cut_results(refine, again, None, runs)
        result.cuts.sort(key=lambda c: c.cut.k)
        if result.plan is not None and len(measured) < sum(1 for c in result.plan.cuts if c.live):
            result.notes.append(
                f"{len(measured)} of {sum(1 for c in result.plan.cuts if c.live)} cuts with live buffers "
                "were measured (binary-search order, then inside the bracket)"
            )
        _conclude(result)
        if result.verdict == "agree":
            result.unexercised = unexercised(findings, model, chosen)
        return result

    def _config(self, cuts: list[Cut], step: float, ad: bool = False) -> dict[str, Any]:
        return {
            **self.base,
            "step": step,
            "ad": ad,
            "cuts": [
                {
                    "k": cut.k,
                    "buffers": [{"position": b.position, "arg": b.arg, "field": b.field} for b in cut.live],
                }
                for cut in cuts
            ],
        }

    def _perturbed_runs(
        self, cuts: list[Cut], prefix: str
    ) -> dict[float, tuple[dict[str, Any], dict[str, Any]]] | None:
        """The +h and -h runs of every eps; None (and ``self.failure``) when one did not get there."""
        perturbed = {}
        for eps in self.sweep:
            plus = self._child(f"{prefix}eps={eps:g}+", self._config(cuts, eps))
            minus = self._child(f"{prefix}eps={eps:g}-", self._config(cuts, -eps))
            for run in (plus, minus):
                if run.get("status") != "ok":
                    self.failure = _not_ok(run)
                    return None
            perturbed[eps] = (plus, minus)
        return perturbed

    def _cut_results(
        self,
        cuts: list[Cut],
        first: dict[str, Any],
        second: dict[str, Any] | None,
        perturbed: dict[float, tuple[dict[str, Any], dict[str, Any]]],
    ) -> list[CutResult]:
        results = []
        for cut in cuts:
            key = str(cut.k)
            values = first["surrogates"].get(key)
            again = second["surrogates"].get(key) if second is not None else values
            cut_ad = (first.get("cut_ad") or {}).get(key) or {}
            if values is None or again is None:
                continue
            cut_jitter = abs(values["value"] - again["value"])
            cut_points = []
            one_sided = []
            for eps in self.sweep:
                plus, minus = perturbed[eps]
                high, low = plus["surrogates"][key]["value"], minus["surrogates"][key]["value"]
                cut_points.append((eps, high - low, 2.0 * eps * float(cut_ad.get(str(eps), 0.0)), 2.0 * eps))
                one_sided.append((high - values["value"], values["value"] - low))
            cut_resolution = values["magnitude"] * 2.0**-23
            results.append(
                CutResult(cut, compare(cut_points, cut_resolution, cut_jitter, self.options.rtol, one_sided))
            )
        return results


def record_cap(at: tuple[int | str, ...] | None) -> int:
    """Backward calls the recording run may make (0: all): enough for the reads asked for."""
    if at is None:
        return 64
    if any(isinstance(spec, str) for spec in at):
        return 0  # "mid" and "last" need the whole run
    return max(64, 4 * max(int(spec) for spec in at))


def _bracket(cuts: list[CutResult]) -> tuple[int, int] | None:
    """(last agreeing cut or 0, first disagreeing cut), or None when no cut disagrees."""
    ordered = sorted(cuts, key=lambda c: c.cut.k)
    first = next((c.cut.k for c in ordered if c.comparison.verdict == "disagree"), None)
    if first is None:
        return None
    low = max((c.cut.k for c in ordered if c.cut.k < first and c.comparison.verdict == "agree"), default=0)
    return low, first


def _objective(run: dict[str, Any]) -> float | None:
    values = run.get("objective") or []
    if not values or any(v is None for v in values):
        return None
    return float(sum(values))


def _not_ok(run: dict[str, Any]) -> str:
    status = run.get("status")
    if status == "mismatch":
        return f"the probe run did not repeat the recorded run ({run.get('mismatch')}): is the program deterministic (seeded RNG)?"
    if status == "ended":
        return (
            "the probe run ended before the measured backward "
            f"(exit status {run.get('exit_status')}{': ' + str(run['error']) if run.get('error') else ''})"
        )
    return f"probe run status {status}"


def _conclude(result: Result) -> None:
    e2e = result.end_to_end
    assert e2e is not None
    result.verdict = e2e.verdict
    result.reason = e2e.reason
    off_tape = result.measurement.objective_off_tape if result.measurement else None
    if off_tape and e2e.verdict == "agree":
        result.verdict = "undecided"
        result.reason = (
            f"{off_tape}; the gradient agrees with finite differences of the objective it was computed "
            "for, but that is not the one the program uses it with"
        )
    plan = result.plan
    if plan is None:
        return
    disagreeing = [c for c in result.cuts if c.comparison.verdict == "disagree"]
    if disagreeing:
        first_k = disagreeing[0].cut.k
        agreeing = [c for c in result.cuts if c.cut.k < first_k and c.comparison.verdict == "agree"]
        start = agreeing[-1].cut.k if agreeing else 0
    else:
        if e2e.verdict != "disagree" or not all(c.comparison.verdict == "agree" for c in result.cuts):
            return
        window = result.measurement.window if result.measurement else []
        measured = {c.cut.k for c in result.cuts}
        if len(window) != 1 or any(cut.live and cut.k not in measured for cut in plan.cuts):
            result.notes.append(
                "every cut inside the tape agrees but the end-to-end check does not: the defect is across "
                "tapes (horizon truncation, manual seeding, objective off the tape), not inside this tape"
            )
            return
        # one tape, every cut agrees, the objective at its end does not: the defect is after the last cut
        first_k = len(plan.operations)
        start = max(measured, default=0)
        result.notes.append(
            "every cut agrees but the objective at the end of the tape does not: the defect is in the "
            "operations after the last cut"
        )
    operations = plan.operations[start:first_k]
    locations: list[dict[str, Any]] = []
    for op in operations:
        loc = {"file": op["file"], "line": op["line"]}
        if loc not in locations:
            locations.append(loc)
    lines = {(loc["file"], loc["line"]) for loc in locations}
    seqs = {op["seq"] for op in operations}
    related = []
    for finding in result.findings:
        evidence_seqs = {
            s
            for key, value in finding.evidence.items()
            if "seq" in key
            for s in (value if isinstance(value, list) else [value])
            if isinstance(s, int)
        }
        places = {(finding.location.file, finding.location.line)} | {
            (r.file, r.line) for r in finding.related
        }
        if evidence_seqs & seqs or places & lines:
            related.append(
                {"code": finding.code, "file": finding.location.file, "line": finding.location.line}
            )
    result.first_disagreeing = {
        "cut": first_k,
        "last_agreeing_cut": start,
        "step": plan.steps.step_of(first_k - 1),
        "operations": operations,
        "locations": locations,
        "findings": related,
    }
    if e2e.verdict != "disagree":
        result.verdict = "disagree"
        result.reason = None
        result.notes.append(
            "the end-to-end check does not disagree, but the tape's gradient of an intermediate state does"
        )
