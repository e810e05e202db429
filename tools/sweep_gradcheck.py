"""Sweep ``gradcheck`` (and ``bisect --run``) over every program we have: never a false "disagree".

    python tools/sweep_gradcheck.py                      # the zoo and the real programs
    python tools/sweep_gradcheck.py --only zoo           # tests/programs only
    python tools/sweep_gradcheck.py --only real          # Warp's optim examples, Newton's diffsim ones
    python tools/sweep_gradcheck.py rebuilt seed         # programs whose name contains a word
    python tools/sweep_gradcheck.py --captured           # programs that replay captured graphs
    python tools/sweep_gradcheck.py --json sweep.json --workdir /tmp/sweep

Programs and what each must get:

- every zoo program (``tests/programs``) whose gradient is right (fixed twins, ``ok_``
  look-alikes) and every real program (the ``tools/check_real_programs.py`` list that
  reads a gradient, plus ``warp.examples.core.example_torch``): ``agree``, or
  ``undecided`` with a reason. A ``disagree`` there is a FALSE DISAGREE, the worst output
  the tool can give;
- every zoo program whose gradient is wrong (``# expect:`` markers or ``# grad: wrong``):
  ``disagree`` (an ``agree`` is a MISS, reported; ``undecided`` needs a reason), then
  ``bisect --run``, whose first disagreeing cut must bracket the defect: a marker line among
  the bracket's operations, a marker's finding among the findings the bracket names, or a
  marker inside the source of a kernel the bracket launches.

Prints a table (program, kind, verdict, runs, seconds, bisect bracket) and a summary; exit
status 1 when a correct program got "disagree" or any verdict is "undecided" without a reason.
Sequential and CPU-heavy (each check is 1 + 2 + 2E fresh processes): run it in the
background on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.zoo import Program as ZooProgram  # noqa: E402
from tests.zoo import discover  # noqa: E402
from tools.check_real_programs import PROGRAMS as REAL_PROGRAMS  # noqa: E402
from tools.check_real_programs import WARP_PY, run_process  # noqa: E402


@dataclass
class Target:
    name: str
    kind: str  # "correct" or "buggy"
    python: str
    program: list[str]  # SCRIPT.py, or -m MODULE, then the arguments
    cwd: Path
    timeout_s: float
    markers: set[tuple[str, int]] = field(default_factory=set)  # (code, line) of a buggy program's defect
    captured: bool = False  # the program replays a captured graph (wp.capture_launch)
    source: Path | None = None  # the file holding the markers (and the kernels)


@dataclass
class Row:
    name: str
    kind: str
    verdict: str = "-"
    runs: int = 0
    seconds: float = 0.0
    reason: str = ""
    bisect_verdict: str = ""
    bisect_runs: int = 0
    bisect_seconds: float = 0.0
    bracket: str = ""  # "yes (lines ...)", "NO (lines ...)", "" when not bisected
    problem: str = ""  # FALSE DISAGREE, MISS, NO REASON, NO RESULT, BRACKET MISSED


def zoo_targets(words: list[str]) -> list[Target]:
    import warp

    version = tuple(int(part) for part in warp.__version__.split(".")[:2])
    targets = []
    for program in discover():
        if words and not any(word in program.name for word in words):
            continue
        if program.skip_reason():
            print(f"skip {program.name}: {program.skip_reason()}", file=sys.stderr)
            continue
        targets.append(
            Target(
                name=program.name,
                kind="buggy" if program.gradient_wrong_on(version) else "correct",
                python=sys.executable,
                program=[str(program.path)],
                cwd=program.path.parent,
                timeout_s=900,
                markers=_markers(program),
                source=program.path,
                captured=any("capture_launch" in path.read_text() for path in _sources(program)),
            )
        )
    return targets


def _sources(program: ZooProgram) -> list[Path]:
    """The program's file, or every module of its package folder."""
    folder = program.path.parent
    return sorted(folder.glob("*.py")) if folder != ROOT / "tests" / "programs" else [program.path]


def _markers(program: ZooProgram) -> set[tuple[str, int]]:
    return {(code, line) for code, line in program.expected}


def real_targets(words: list[str], workdir: Path, slow: bool) -> list[Target]:
    targets = [
        Target(
            name=f"real:{p.name}",
            kind="correct",
            python=p.python,
            program=["-m", p.module, *p.args],
            cwd=workdir,
            timeout_s=max(p.timeout_s, 900),
            captured=".diffsim." in p.module,  # Newton's diffsim examples capture forward + backward
        )
        for p in REAL_PROGRAMS
        if (slow or not p.slow) and Path(p.python).exists()
    ]
    targets.append(
        Target(
            name="real:torch_rosenbrock",
            kind="correct",
            python=WARP_PY,
            program=["-m", "warp.examples.core.example_torch", "--device", "cpu", "--headless", "--num-frames", "2",
                     "--train-iters", "3", "--num-particles", "64"],
            cwd=workdir,
            timeout_s=900,
        )
    )  # fmt: skip
    return [t for t in targets if not words or any(word in t.name for word in words)]


def _measure(target: Target, command: list[str], eps: str | None) -> tuple[dict[str, Any] | None, float, str]:
    env = dict(os.environ)
    env.setdefault("PYTHONHASHSEED", "0")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    argv = [
        target.python,
        "-m",
        "warptrace",
        *command,
        "-q",
        "--format",
        "json",
        *(["--eps", eps] if eps else []),
        *target.program,
    ]
    run = run_process(argv, target.cwd, target.timeout_s * 9, env)
    if run.timed_out:
        return None, run.wall_s, "timed out"
    try:
        return json.loads(run.stdout), run.wall_s, ""
    except ValueError:
        return None, run.wall_s, f"exit {run.rc}: {run.stderr.strip()[-300:]}"


def _kernel_spans(source: Path) -> dict[str, tuple[int, int]]:
    """function name -> (first, last) line of its definition, in the program's file or folder."""
    spans: dict[str, tuple[int, int]] = {}
    files = [source] if source.parent.name == "programs" else sorted(source.parent.glob("*.py"))
    for path in files:
        lines = path.read_text().splitlines()
        for i, text in enumerate(lines):
            match = re.match(r"(\s*)def (\w+)\(", text)
            if not match:
                continue
            indent = len(match.group(1))
            end = len(lines)
            for j in range(i + 1, len(lines)):
                body = lines[j]
                if body.strip() and len(body) - len(body.lstrip()) <= indent:
                    end = j  # the last line of the body is line j (1-based)
                    break
            spans[match.group(2)] = (i + 1, end)
    return spans


def _bracket(target: Target, result: dict[str, Any]) -> tuple[bool, str]:
    first = result.get("first_disagreeing") or {}
    locations = first.get("locations") or []
    lines = sorted({loc["line"] for loc in locations})
    text = f"lines {', '.join(map(str, lines))}" if lines else "no location"
    marker_lines = {line for _, line in target.markers}
    if marker_lines & set(lines):
        return True, text
    named = {(f["code"], f["line"]) for f in first.get("findings") or []}
    if named & target.markers:
        return True, text + " (finding there)"
    if target.source is not None:
        spans = _kernel_spans(target.source)
        for op in first.get("operations") or []:
            span = spans.get(op.get("kernel", ""))
            if span and any(span[0] <= line <= span[1] for line in marker_lines):
                return True, text + f" (launches {op['kernel']})"
    return False, text


def sweep(target: Target, eps: str | None, bisect: bool) -> Row:
    row = Row(target.name, target.kind)
    result, seconds, error = _measure(target, ["gradcheck"], eps)
    row.seconds = seconds
    if result is None:
        row.verdict, row.problem, row.reason = "-", "NO RESULT", error
        return row
    row.verdict = result["verdict"]
    row.runs = len(result.get("runs", []))
    row.reason = result.get("reason") or ""
    if row.verdict == "undecided" and not row.reason:
        row.problem = "NO REASON"
    if target.kind == "correct" and row.verdict == "disagree":
        row.problem = "FALSE DISAGREE"
    if target.kind == "buggy" and row.verdict == "agree":
        row.problem = "MISS"
    if target.kind == "buggy" and row.verdict == "disagree" and bisect:
        found, seconds, error = _measure(target, ["bisect", "--run"], eps)
        row.bisect_seconds = seconds
        if found is None:
            row.bisect_verdict, row.bracket = "-", f"NO RESULT ({error})"
            row.problem = row.problem or "BISECT FAILED"
        else:
            row.bisect_verdict = found["verdict"]
            row.bisect_runs = len(found.get("runs", []))
            if found.get("first_disagreeing"):
                ok, text = _bracket(target, found)
                row.bracket = f"{'yes' if ok else 'NO'} ({text})"
                if not ok and target.markers:
                    row.problem = row.problem or "BRACKET MISSED"
            else:
                note = " ".join(found.get("notes") or [])
                across = "across tapes" in note
                row.bracket = "across tapes" if across else "no bracket"
    return row


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("names", nargs="*", help="only programs whose name contains one of these")
    parser.add_argument("--only", choices=("zoo", "real", "all"), default="all")
    parser.add_argument("--eps", help="passed to gradcheck and bisect (default: theirs, 1e-2,1e-3,1e-4)")
    parser.add_argument(
        "--no-bisect", action="store_true", help="skip bisect --run on disagreeing buggy programs"
    )
    parser.add_argument("--slow", action="store_true", help="include the real programs marked slow")
    parser.add_argument(
        "--captured",
        action="store_true",
        help="only the programs that replay captured graphs (wp.capture_launch)",
    )
    parser.add_argument("--json", type=Path, help="also write the rows as JSON")
    parser.add_argument("--workdir", type=Path, help="cwd of the real programs (default: a temporary folder)")
    options = parser.parse_args()

    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="warptrace-sweep-"))
    workdir.mkdir(parents=True, exist_ok=True)
    targets: list[Target] = []
    if options.only in ("zoo", "all"):
        targets += zoo_targets(options.names)
    if options.only in ("real", "all"):
        targets += real_targets(options.names, workdir, options.slow)
    if options.captured:
        targets = [target for target in targets if target.captured]
    header = f"{'program':<48} {'kind':<8} {'verdict':<10} {'runs':>4} {'s':>7}  bisect"
    print(header, flush=True)
    rows = []
    started = time.perf_counter()
    for target in targets:
        row = sweep(target, options.eps, not options.no_bisect)
        rows.append(row)
        bisect = ""
        if row.bisect_verdict:
            bisect = f"{row.bisect_verdict} {row.bisect_runs} runs {row.bisect_seconds:.0f} s, bracket {row.bracket}"
        why = f"  [{row.reason}]" if row.verdict == "undecided" else ""
        flag = f"  <-- {row.problem}" if row.problem else ""
        print(
            f"{row.name:<48} {row.kind:<8} {row.verdict:<10} {row.runs:>4} {row.seconds:>7.1f}  {bisect}{flag}{why}",
            flush=True,
        )
    print()
    counts: dict[str, int] = {}
    for row in rows:
        key = f"{row.kind} -> {row.verdict}"
        counts[key] = counts.get(key, 0) + 1
    for key in sorted(counts):
        print(f"{key}: {counts[key]}")
    problems = [row for row in rows if row.problem]
    for kind in ("FALSE DISAGREE", "NO REASON", "NO RESULT", "MISS", "BRACKET MISSED", "BISECT FAILED"):
        named = [row.name for row in problems if row.problem == kind]
        if named:
            print(f"{kind}: {', '.join(named)}")
    print(f"{len(rows)} programs, {time.perf_counter() - started:.0f} s")
    if options.json:
        options.json.write_text(json.dumps([asdict(row) for row in rows], indent=2) + "\n")
    if not options.workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if any(row.problem in ("FALSE DISAGREE", "NO REASON") for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
