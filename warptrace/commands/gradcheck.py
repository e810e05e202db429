"""``gradcheck SCRIPT.py ARGS`` / ``gradcheck -m MODULE ARGS``: the program's own gradient against finite differences of its objective.

The measurement runs the unmodified script in separate probe processes
(:mod:`warptrace.probe`); the user's own run is never touched. The options shared with
``bisect --run`` (parameters, eps sweep, tolerance, seed) and the code that runs a probe
and prints its report live here too.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from warptrace.commands.base import Command, CommandParser, flush_stdout, write_stderr, write_stdout
from warptrace.commands.run import MODULE_OPTION, program_of, split_program

PROBE_EXIT_STATUS = "0 agree, 1 disagree, 4 undecided (the reason is printed), 2 usage error"


def eps_list(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {text!r}") from None
    if not values or any(not 0.0 < value < 1.0 for value in values):
        raise argparse.ArgumentTypeError("eps values are relative steps between 0 and 1 (e.g. 1e-2,1e-3)")
    return values


def read_list(text: str) -> tuple[int | str, ...]:
    """``--at``: read numbers (from 1) and the names first, mid, last, comma-separated."""
    values: list[int | str] = []
    for part in (p.strip() for p in text.split(",")):
        if part in ("first", "mid", "last"):
            values.append(part)
            continue
        try:
            number = int(part)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not a read: {part!r} (a number from 1, or first, mid, last; comma-separated)"
            ) from None
        if number < 1:
            raise argparse.ArgumentTypeError("reads count from 1")
        values.append(number)
    if not values:
        raise argparse.ArgumentTypeError("no read given")
    return tuple(dict.fromkeys(values))


def add_probe_options(parser: CommandParser) -> None:
    parser.add_argument(
        "--param",
        action="append",
        metavar="LABEL",
        help="parameter to perturb, by label (repeatable; default: the leaves whose gradient the program reads)",
    )
    parser.add_argument(
        "--eps",
        type=eps_list,
        default=None,
        metavar="E,E,...",
        help="relative perturbation sizes (default: 1e-2,1e-3,1e-4 of each parameter's norm)",
    )
    parser.add_argument(
        "--at",
        type=read_list,
        default=None,
        metavar="READ",
        help="which gradient read to measure: N (the N-th), first, mid, last, or several "
        "(first,mid,last: one measurement each, disagree if one disagrees); default: the first",
    )
    parser.add_argument("--rtol", type=float, default=None, help="relative tolerance (default: 1e-2)")
    parser.add_argument("--seed", type=int, default=None, help="seed of the random direction and weights")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument(
        "-j",
        "--jobs",
        type=job_count,
        default=1,
        metavar="N",
        help="probe runs at once on this machine (one CUDA device each when it has several; default: 1)",
    )
    parser.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run the probe runs as Ray tasks, the working directory shipped with them: --ray (ray.init()'s "
        "default cluster, else a local one) or --ray=ADDRESS (pip install 'warptrace[ray]')",
    )
    # `--ray SCRIPT.py` runs the script: the address only with `=`
    parser.value_options.discard("--ray")


def job_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of jobs: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("at least 1 job")
    return value


def add_module_option(parser: CommandParser) -> None:
    parser.add_argument(
        MODULE_OPTION,
        dest="module",
        metavar="MODULE",
        help="the program is a module, like `python -m MODULE` (the rest of the line is its arguments)",
    )


def parse_program_args(parser: CommandParser, argv: Sequence[str], dest: str) -> argparse.Namespace:
    """Our options, then the program (``SCRIPT.py`` or ``-m MODULE``) and its arguments:
    ``args.<dest>``, ``args.args`` and ``args.as_module``."""
    own, program = split_program(parser, argv)
    args = parser.parse_args(own)
    target, rest, as_module = program_of(parser, program)
    setattr(args, dest, target)
    args.args, args.as_module = rest, as_module
    return args


def run_probe(
    args: argparse.Namespace, script: str, script_args: list[str], *, cuts: bool, command: str
) -> int:
    """Measure (``cuts``: and bisect), print the report, return 0 agree / 1 disagree / 4 undecided."""
    from warptrace.probe.driver import DEFAULT_EPS, DEFAULT_SEED, Driver, Options, ProbeFailed
    from warptrace.probe.verdict import DEFAULT_RTOL, Result
    from warptrace.report import probe as probe_report
    from warptrace.runner import ScriptRunner

    as_module = bool(getattr(args, "as_module", False))
    # a missing script or module is a usage error, before any run
    ScriptRunner(script, script_args, as_module=as_module).prepare()
    options = Options(
        script=script,
        args=list(script_args),
        as_module=as_module,
        at=args.at,
        params=args.param,
        eps=args.eps or DEFAULT_EPS,
        rtol=args.rtol if args.rtol is not None else DEFAULT_RTOL,
        seed=args.seed if args.seed is not None else DEFAULT_SEED,
        cuts=cuts,
        jobs=args.jobs,
        ray=args.ray,
    )
    progress = None if args.quiet else (lambda line: write_stderr(f"warptrace: {line}"))
    driver = Driver(options, progress)  # LaunchError (exit 2): Ray missing or unreachable
    try:
        result = driver.run()
    except ProbeFailed as exc:  # its message names the log, which stays on disk
        result = Result(
            "undecided",
            reason=str(exc),
            runs=driver.runs,
            cwd=os.getcwd(),
            elapsed_s=driver.elapsed,
            where=driver.launcher.where,
        )
    else:
        driver.cleanup()
    if args.format == "json":
        text = probe_report.render_json(result, command)
    else:
        text = probe_report.render_text(result, f"{command} {'-m ' if as_module else ''}{script}")
    flush_stdout()
    write_stdout(text)
    return probe_report.EXIT_STATUS[result.verdict]


class GradcheckCommand(Command):
    name = "gradcheck"
    help = "is the gradient wrong? the program's gradient against finite differences of its objective"
    exit_status = (PROBE_EXIT_STATUS,)

    def prepare_parser(self, parser: CommandParser) -> None:
        add_module_option(parser)
        parser.add_argument(
            "script", metavar="SCRIPT.py", nargs="?", help="the program, run unmodified in probe processes"
        )
        add_probe_options(parser)
        parser.add_argument(
            "--format", choices=("text", "json"), default="text", help="output format (default: %(default)s)"
        )
        parser.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS", help="the program's arguments")

    def parse_args(self, parser: CommandParser, argv: Sequence[str]) -> argparse.Namespace:
        return parse_program_args(parser, argv, "script")

    def run(self, args: argparse.Namespace, parser: CommandParser) -> int:
        return run_probe(args, args.script, args.args, cuts=False, command="gradcheck")
