"""One prepared check of warptrace on whatever device Warp reports (issue 40).

    python tools/check_device.py                 # cuda:0 when present, otherwise the CPU
    python tools/check_device.py --device cpu    # force a device
    python tools/check_device.py --json out.json --keep /tmp/devcheck

Every scenario in ``tools/device_scenarios/`` is a small program that runs on the device
given by ``WARPTRACE_CHECK_DEVICE`` and prints only digests of its results. For each one
this runs

1. the program plainly (``python SCENARIO.py``),
2. the program under warptrace (``python -m warptrace -q --no-analyze -o W.wtrace``, plus
   ``--check-numerics`` for the ``num_*`` scenarios),
3. the analysis of that trace, in this process (``warptrace.load`` checks the trace's
   integrity; ``warptrace.analyze`` gives the findings),

and compares: stdout and exit status identical, the trace readable and complete, every
``# expect: WTxxx`` marker of the scenario found at its line, and no other error or
warning finding. ``gradcheck_*`` scenarios instead run ``python -m warptrace gradcheck``
and expect the verdict "agree". A scenario that cannot run on the device (streams on the
CPU, torch not installed) exits 77 and is listed as skipped with its reason. Then, with
``--bench`` (default on a CUDA device), the recorder's per-operation cost on the device
(``device_scenarios/_bench_ops.py``; the full CPU benchmark is ``tools/bench_record.py``).

It prints one summary table and exits 1 on any difference (0 otherwise, 2 on usage
errors). On a CUDA device it is meant to finish in a few minutes; in CI it runs its CPU
form so the script itself stays tested. It needs nothing beyond ``pip install -e
'.[test]'``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "tools" / "device_scenarios"
SKIP_RC = 77
MARKER = re.compile(r"#\s*expect:\s*(WT\d{3}(?:\s*,\s*WT\d{3})*)")


@dataclass
class Outcome:
    name: str
    status: str = "ok"  # ok | FAIL | skipped
    detail: list[str] = field(default_factory=list)
    seconds: float = 0.0
    findings: list[str] = field(default_factory=list)

    def fail(self, why: str) -> None:
        self.status = "FAIL"
        self.detail.append(why)


def pick_device(requested: str | None) -> tuple[str, str]:
    """The device and a note on how it was chosen (Warp is imported in a child process)."""
    if requested:
        return requested, "as requested"
    probe = subprocess.run(
        [sys.executable, "-c", "import warp as wp; wp.config.quiet = True; print(wp.get_cuda_device_count())"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    count = (
        int(probe.stdout.strip().splitlines()[-1]) if probe.returncode == 0 and probe.stdout.strip() else 0
    )
    if count:
        return "cuda:0", f"{count} CUDA device(s)"
    return "cpu", "no CUDA device: the same scenarios run on the CPU"


def expected_markers(script: Path) -> set[tuple[str, int]]:
    found: set[tuple[str, int]] = set()
    for lineno, line in enumerate(script.read_text().splitlines(), start=1):
        match = MARKER.search(line)
        if match:
            found.update((code.strip(), lineno) for code in match.group(1).split(","))
    return found


def normalize(text: str) -> list[str]:
    """Lines with timing text rewritten (the rules of tools/check_real_programs.py)."""
    sys.path.insert(0, str(REPO / "tools"))
    from check_real_programs import normalize as rewrite

    return rewrite(text)[0]


def run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(
            argv, -9, str(exc.stdout or ""), f"timed out after {timeout:.0f} s"
        )


def check_traced(script: Path, work: Path, env: dict[str, str], timeout: float) -> Outcome:
    import warptrace

    out = Outcome(script.stem)
    plain = run([sys.executable, str(script)], work, env, timeout)
    if plain.returncode == SKIP_RC:
        out.status = "skipped"
        out.detail.append(plain.stdout.strip().splitlines()[-1].removeprefix("skip: "))
        return out
    trace = work / f"{script.stem}.wtrace"
    flags = ["--check-numerics"] if script.stem.startswith("num_") else []
    traced = run([sys.executable, "-m", "warptrace", "-q", "--no-analyze", *flags, "-o", str(trace), str(script)],
                 work, env, timeout * 3)  # fmt: skip
    if plain.returncode != 0:
        out.fail(f"plain run exited {plain.returncode}: {plain.stderr.strip()[-300:]}")
    if traced.returncode != plain.returncode:
        out.fail(
            f"exit status: plain {plain.returncode}, traced {traced.returncode}: {traced.stderr.strip()[-300:]}"
        )
    if normalize(traced.stdout) != normalize(plain.stdout):
        out.fail(f"stdout differs: plain {plain.stdout.strip()!r}, traced {traced.stdout.strip()!r}")
    if not (trace / "meta.json").is_file():
        out.fail("no trace written")
        return out
    try:
        loaded = warptrace.load(trace)
        if not loaded.meta.get("complete", False):
            out.fail("trace not complete")
        report = warptrace.analyze(trace)
    except Exception as exc:  # a broken trace is what this check is for: report it, go on
        out.fail(f"trace unreadable: {type(exc).__name__}: {exc}")
        return out
    expected = expected_markers(script)
    seen: set[tuple[str, int]] = set()
    for finding in report.findings:
        key = (finding.code, finding.location.line if finding.location else -1)
        seen.add(key)
        severity = finding.severity.label
        if severity in ("error", "warning"):
            out.findings.append(f"{finding.code}:{key[1]}")
            if key not in expected:
                out.fail(f"unexpected {severity} {finding.code} at line {key[1]}: {finding.message[:160]}")
    for code, line in sorted(expected - seen):
        out.fail(f"missing {code} at line {line}")
    return out


def check_gradcheck(script: Path, work: Path, env: dict[str, str], timeout: float) -> Outcome:
    out = Outcome(script.stem)
    result = run([sys.executable, "-m", "warptrace", "gradcheck", "-q", "--format", "json", str(script)],
                 work, env, timeout * 12)  # fmt: skip
    try:
        verdict = json.loads(result.stdout)
    except ValueError:
        out.fail(f"gradcheck exited {result.returncode} without JSON: {result.stderr.strip()[-300:]}")
        return out
    out.findings.append(f"verdict {verdict.get('verdict')}")
    if verdict.get("verdict") != "agree" or result.returncode != 0:
        out.fail(
            f"gradcheck: {verdict.get('verdict')} ({verdict.get('reason', '')}), exit {result.returncode}"
        )
    return out


def check_bench(device: str, work: Path, env: dict[str, str], timeout: float) -> Outcome:
    """The per-operation rows of ``device_scenarios/_bench_ops.py`` on the device."""
    out = Outcome("bench: µs per operation")
    result = run([sys.executable, str(SCENARIOS / "_bench_ops.py"), "--ops", "500", "--repeat", "3"],
                 work, env, timeout * 10)  # fmt: skip
    try:
        rows = json.loads(result.stdout.strip().splitlines()[-1])["rows"]
    except (ValueError, IndexError, KeyError):
        out.fail(f"_bench_ops.py exited {result.returncode}: {result.stderr.strip()[-300:]}")
        return out
    out.detail.append(f"{'operation':<26}{'plain':>9}{'traced':>9}{'added':>9}")
    for name, row in rows.items():
        out.detail.append(f"{name:<26}{row['plain_us']:9.2f}{row['traced_us']:9.2f}{row['added_us']:9.2f}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", help="Warp device (default: cuda:0 when present, otherwise cpu)")
    parser.add_argument("--only", nargs="*", default=None, help="scenario names (default: all)")
    parser.add_argument("--bench", action=argparse.BooleanOptionalAction, default=None,
                        help="also the per-operation recorder rows (default: on a CUDA device)")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per plain run (traced: 3x)")
    parser.add_argument("--json", help="write the outcomes to this file")
    parser.add_argument("--keep", help="keep the traces in this folder (default: a temporary one, removed)")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(REPO))
    device, how = pick_device(args.device)
    print(f"device: {device} ({how})", flush=True)
    scripts = sorted(p for p in SCENARIOS.glob("*.py") if not p.name.startswith("_"))
    if args.only:
        unknown = set(args.only) - {p.stem for p in scripts}
        if unknown:
            parser.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
        scripts = [p for p in scripts if p.stem in args.only]

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="wt-devcheck-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, WARPTRACE_CHECK_DEVICE=device, PYTHONHASHSEED="0")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    outcomes: list[Outcome] = []
    started = time.perf_counter()
    try:
        for script in scripts:
            t0 = time.perf_counter()
            print(f"[{script.stem}] ...", flush=True)
            check = check_gradcheck if script.stem.startswith("gradcheck_") else check_traced
            outcome = check(script, work, env, args.timeout)
            outcome.seconds = time.perf_counter() - t0
            outcomes.append(outcome)
        if args.bench if args.bench is not None else device.startswith("cuda"):
            t0 = time.perf_counter()
            outcome = check_bench(device, work, env, args.timeout)
            outcome.seconds = time.perf_counter() - t0
            outcomes.append(outcome)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    total = time.perf_counter() - started
    width = max(len(o.name) for o in outcomes) if outcomes else 10
    print(f"\n{'scenario':<{width}}  status   seconds  findings / notes")
    for o in outcomes:
        notes = ", ".join(o.findings) or "-"
        print(f"{o.name:<{width}}  {o.status:<7}  {o.seconds:7.1f}  {notes}")
        for line in o.detail:
            print(f"{'':<{width}}    {line}")
    failed = [o.name for o in outcomes if o.status == "FAIL"]
    print(f"\n{len(outcomes)} checks on {device} in {total:.0f} s: {len(failed)} failed"
          + (f" ({', '.join(failed)})" if failed else ""))  # fmt: skip
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"device": device, "seconds": total, "outcomes": [o.__dict__ for o in outcomes]}, indent=2
            )
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
