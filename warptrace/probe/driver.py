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

The runs after the recording are independent processes: with ``--jobs N`` or ``--ray``
(:mod:`warptrace.probe.launch`) the driver asks for them before it needs their results, so
they run side by side. It waits for them in the order a serial driver would, and reads
their results the same way, so the verdict is the serial one. The two unperturbed runs then
run on different workers (the determinism check covers the workers too); when they differ,
a third unperturbed run on the first one's worker tells a worker mismatch from a program
that does not repeat itself.
"""

from __future__ import annotations

import os
import shutil
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
from warptrace.probe.launch import Launcher, LocalLauncher, ProbeFailed, Run, SerialLauncher
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
    jobs: int = 1  # probe runs at once on this machine
    ray: str | None = None  # run them as Ray tasks: the cluster's address ("": ray.init()'s default)


__all__ = ["Driver", "Options", "ProbeFailed"]


def make_launcher(options: Options, progress: Callable[[str], None]) -> Launcher:
    """Where the runs go: a Ray cluster, N jobs here, or one after another (LaunchError: Ray missing or unreachable)."""
    if options.ray is not None:
        from warptrace.probe.ray_launch import RayLauncher

        return RayLauncher(options.ray, options.timeout, progress)
    if options.jobs > 1:
        return LocalLauncher(options.jobs, options.timeout, progress)
    return SerialLauncher(options.timeout, progress)


class Driver:
    def __init__(self, options: Options, progress: Callable[[str], None] | None = None) -> None:
        self.options = options
        self.progress = progress or (lambda line: None)
        self.launcher = make_launcher(options, self.progress)
        self.parallel = options.ray is not None or options.jobs > 1  # ask for runs before they are needed
        self.elapsed: float | None = None
        self.workdir = tempfile.mkdtemp(prefix="warptrace-probe-")
        self.runs: list[RunInfo] = []
        self.sweep: list[float] = []
        self.base: dict[str, Any] = {}
        self.failure: str | None = None
        self.prefix = ""  # of run names, per read measured (--at first,last)
        self.plain: Model | None = None  # the trace as recorded (the model itself without capture)
        # array_id -> backward seqs after which another framework cleared its gradient (seen in a probe run)
        self.unseen_clears: dict[int, list[int]] = {}
        self.started = 0  # runs asked for

    def cleanup(self) -> None:
        """Remove the runs' folder (the recording, configs, results and logs)."""
        shutil.rmtree(self.workdir, ignore_errors=True)

    # ------------------------------------------------------------------ runs

    def _start(self, name: str, config: dict[str, Any], pin: int | None = None) -> Run:
        """Ask for a run (the launcher may start it now); its result comes from :meth:`_result`."""
        config = {
            "script": self.options.script,
            "args": self.options.args,
            "module": self.options.as_module,
            **config,
        }
        name = self.prefix + name
        self.started += 1
        file_name = f"run{self.started}"
        config["result"] = os.path.join(self.workdir, f"{file_name}.json")
        info = RunInfo(name, 0.0, "queued")
        self.runs.append(info)
        run = Run(
            name=name,
            number=self.started,
            config=config,
            config_path=os.path.join(self.workdir, f"{file_name}.config.json"),
            log_path=os.path.join(self.workdir, f"{file_name}.log"),
            info=info,
            pin=pin,
        )
        self.launcher.submit(run)
        return run

    def _result(self, run: Run) -> dict[str, Any]:
        """The run's result, waiting for it (ProbeFailed when it failed or died)."""
        return self.launcher.result(run)

    def _child(self, name: str, config: dict[str, Any], pin: int | None = None) -> dict[str, Any]:
        return self._result(self._start(name, config, pin))

    def _abandon(self, runs: list[Run]) -> None:
        """Runs asked for ahead whose results are not needed after all: stop them; forget the unstarted ones."""
        self.launcher.cancel(runs)
        for run in runs:
            if not run.started and run.info in self.runs:
                self.runs.remove(run.info)

    # ------------------------------------------------------------------ main

    def run(self) -> Result:
        started = time.perf_counter()
        try:
            result = self._run()
        finally:
            self.launcher.close()
            self.elapsed = time.perf_counter() - started
        result.elapsed_s = self.elapsed
        result.where = self.launcher.where
        for sample in result.samples:
            sample.elapsed_s, sample.where = self.elapsed, self.launcher.where
        return result

    def _run(self) -> Result:
        options = self.options
        trace_path = os.path.join(self.workdir, "record.wtrace")
        recorded = self._child(
            "record", {"mode": "record", "trace": trace_path, "backward_cap": record_cap(options.at)}
        )
        trace = read_trace(trace_path)
        # the model of the analysis: graph captures replayed where they ran (a replay is a
        # recording of its own); the trace as recorded tells where a probe run meets each one
        model = build_model(trace)
        self.launcher.devices_used({info.device for info in model.arrays.values() if info.device})
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
                    "role": None if p.role is None else p.role.as_json(),
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
        # in parallel, the two unperturbed runs go to different workers (pins 0 and 1), so that the
        # determinism check covers the workers too; the other runs need the first one's seeds when
        # the program seeds by hand, else they all start at once
        ahead = self.parallel and not chosen.seeds
        first_run = self._start(
            "unperturbed-1",
            {**self._config(cuts, 0.0, ad=True), "seed_in": None, "seed_out": seed_file},
            pin=0 if self.parallel else None,
        )
        second_run: Run | None = None
        perturbed_runs: list[Run] | None = None
        if ahead:
            second_run = self._start("unperturbed-2", self._config(cuts, 0.0, ad=False), pin=1)
            perturbed_runs = self._start_perturbed(cuts, "")
        first = self._result(first_run)
        unseen = first.get("unseen_clear")
        if unseen is not None and len(self.unseen_clears) < MAX_UNSEEN_CLEARS:
            self._abandon([run for run in [second_run, *(perturbed_runs or [])] if run is not None])
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
        if second_run is None:
            second_run = self._start(
                "unperturbed-2", self._config(cuts, 0.0, ad=False), pin=1 if self.parallel else None
            )
            if self.parallel:
                perturbed_runs = self._start_perturbed(cuts, "")
        second = self._result(second_run)
        for run in (first, second):
            if run.get("status") != "ok":
                self._abandon(perturbed_runs or [])
                result.reason = _not_ok(run)
                return result
        for note in first.get("notes") or []:
            if note not in result.notes:
                result.notes.append(note)
        objective = _objective(first)
        if objective is None:
            self._abandon(perturbed_runs or [])
            result.reason = "a backward in the window has nothing to difference (no loss= and no seed)"
            return result
        result.objective = objective
        if first.get("seed_digest") != second.get("seed_digest"):
            self._abandon(perturbed_runs or [])
            result.reason = self._workers_differ(first_run, second_run, first, second) or (
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
            self._abandon(perturbed_runs or [])
            result.reason = self._workers_differ(first_run, second_run, first, second) or (
                f"the program is not deterministic: two unperturbed runs give objectives {objective!r} and "
                f"{other!r} (seed every random number generator; finite differences need a repeatable run)"
            )
            return result
        if jitter > 0:
            result.notes.append(
                f"two unperturbed runs differ by {jitter:.3g} in the objective (within its resolution)"
            )
        perturbed = self._perturbed_results(perturbed_runs or self._start_perturbed(cuts, ""))
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
            again_run = self._start(f"round{round_number}-unperturbed", self._config(refine, 0.0, ad=True))
            ahead_runs = self._start_perturbed(refine, f"round{round_number}-") if self.parallel else None
            again = self._result(again_run)
            runs = self._perturbed_results(
                ahead_runs or self._start_perturbed(refine, f"round{round_number}-")
            )
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

    def _start_perturbed(self, cuts: list[Cut], prefix: str) -> list[Run]:
        """Ask for the +h and -h runs of every eps (in that order)."""
        runs = []
        for eps in self.sweep:
            runs.append(self._start(f"{prefix}eps={eps:g}+", self._config(cuts, eps)))
            runs.append(self._start(f"{prefix}eps={eps:g}-", self._config(cuts, -eps)))
        return runs

    def _perturbed_results(
        self, runs: list[Run]
    ) -> dict[float, tuple[dict[str, Any], dict[str, Any]]] | None:
        """The +h and -h results of every eps; None (and ``self.failure``) when one did not get there."""
        perturbed = {}
        for index, eps in enumerate(self.sweep):
            try:
                plus = self._result(runs[2 * index])
                minus = self._result(runs[2 * index + 1])
            except ProbeFailed:
                self._abandon(runs[2 * index + 2 :])
                raise
            for run in (plus, minus):
                if run.get("status") != "ok":
                    self.failure = _not_ok(run)
                    self._abandon(runs[2 * index + 2 :])
                    return None
            perturbed[eps] = (plus, minus)
        return perturbed

    def _workers_differ(
        self, first_run: Run, second_run: Run, first: dict[str, Any], second: dict[str, Any]
    ) -> str | None:
        """When two unperturbed runs on different workers differ: rerun the second on the first's
        worker; the reason when that one repeats the first (the workers differ, not the program)."""
        if first_run.worker is None or second_run.worker is None or first_run.worker == second_run.worker:
            return None
        config = dict(second_run.config)
        config.pop("result", None)
        third = self._child("unperturbed-3", config, pin=first_run.worker)
        if third.get("status") != "ok" or _objective(third) != _objective(first):
            return None
        if third.get("seed_digest") != first.get("seed_digest") or third.get("surrogates") != first.get(
            "surrogates"
        ):
            return None
        here, there = first_run.info.worker or "one worker", second_run.info.worker or "another"
        return (
            f"the workers do not compute the same result: two unperturbed runs give objectives "
            f"{_objective(first)!r} on {here} and {_objective(second)!r} on {there}, and a third run on "
            f"{here} repeats the first (different devices, drivers or files per worker?); "
            "measure with --jobs 1 or on identical workers"
        )

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
