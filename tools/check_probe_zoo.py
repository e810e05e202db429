"""gradcheck (or bisect --run) over the whole program zoo: does the measurement match the truth?

Every zoo program declares whether its gradient is wrong (``# grad: wrong``, or any
``# expect:`` marker) or right. The measurement must say ``disagree`` on every wrong one
and ``agree`` on every right one, or ``undecided`` with a reason; a wrong verdict
(agree on a wrong gradient, disagree on a right one) is a bug.

    python tools/check_probe_zoo.py [--bisect] [--eps 1e-2,1e-3] [NAME_SUBSTRING ...]

Prints one line per program (verdict, expected, runs, seconds) and a summary. Runs are
sequential: each program costs 1 + 2 + 2E fresh processes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.zoo import discover  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("names", nargs="*", help="only programs whose name contains one of these")
    parser.add_argument("--bisect", action="store_true", help="bisect --run instead of gradcheck")
    parser.add_argument("--eps", default="1e-2,1e-3")
    options = parser.parse_args()
    import warp

    version = tuple(int(part) for part in warp.__version__.split(".")[:2])
    programs = [p for p in discover() if not options.names or any(n in p.name for n in options.names)]
    wrong_verdicts = []
    counts: dict[str, int] = {}
    total = 0.0
    for program in programs:
        if program.skip_reason():
            continue
        command = ["bisect", "--run"] if options.bisect else ["gradcheck"]
        started = time.perf_counter()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "warptrace",
                *command,
                "-q",
                "--format",
                "json",
                "--eps",
                options.eps,
                str(program.path),
            ],
            capture_output=True,
            text=True,
            cwd=program.path.parent,
            timeout=1800,
        )
        wall = time.perf_counter() - started
        total += wall
        try:
            result = json.loads(done.stdout)
        except ValueError:
            print(f"{program.name:<45} NO RESULT (exit {done.returncode}): {done.stderr.strip()[-200:]}")
            wrong_verdicts.append(program.name)
            continue
        wrong = program.gradient_wrong_on(version)
        expected = "disagree" if wrong else "agree"
        verdict = result["verdict"]
        key = f"{'wrong' if wrong else 'right'} gradient -> {verdict}"
        counts[key] = counts.get(key, 0) + 1
        ok = verdict in (expected, "undecided")
        if not ok:
            wrong_verdicts.append(program.name)
        reason = f"  ({result.get('reason')})" if verdict == "undecided" else ""
        extra = ""
        if options.bisect and result.get("first_disagreeing"):
            first = result["first_disagreeing"]
            extra = f"  cut {first['cut']} lines {[loc['line'] for loc in first['locations']]}"
        print(
            f"{program.name:<45} {verdict:<10} expected {expected:<9} {len(result.get('runs', []))} runs "
            f"{wall:5.1f} s{'' if ok else '  WRONG VERDICT'}{extra}{reason}",
            flush=True,
        )
    print()
    for key, count in sorted(counts.items()):
        print(f"{key}: {count}")
    print(f"{len(programs)} programs, {total:.0f} s; wrong verdicts: {', '.join(wrong_verdicts) or 'none'}")
    return 1 if wrong_verdicts else 0


if __name__ == "__main__":
    sys.exit(main())
