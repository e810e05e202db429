"""``bisect TRACE``: the bisection plan, offline; ``bisect --run SCRIPT.py ARGS`` (or
``--run -m MODULE ARGS``): execute it.

The plan comes from :mod:`warptrace.analysis.bisect` (no Warp); ``--run`` measures every
cut with the probe of ``gradcheck`` and names the first one where finite differences and
autodiff disagree.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from warptrace.commands.base import Command, CommandParser, load_trace, write_stdout
from warptrace.commands.gradcheck import (
    PROBE_EXIT_STATUS,
    add_module_option,
    add_probe_options,
    parse_program_args,
    run_probe,
)
from warptrace.commands.run import split_program
from warptrace.errors import UsageError

_PROBE_ONLY = ("param", "eps", "at", "rtol", "seed")


class BisectCommand(Command):
    name = "bisect"
    help = "plan finite-difference bisection of a tape (TRACE), or run it on a script (--run)"
    exit_status = ("0 plan printed, 2 usage error or unreadable trace", f"--run: {PROBE_EXIT_STATUS}")

    def prepare_parser(self, parser: CommandParser) -> None:
        parser.add_argument(
            "target",
            metavar="TRACE | SCRIPT.py",
            nargs="?",
            help="a .wtrace directory, or with --run a script",
        )
        parser.add_argument(
            "--run", action="store_true", help="run the plan on SCRIPT.py or -m MODULE (probe processes)"
        )
        add_module_option(parser)
        parser.add_argument(
            "--tape",
            type=int,
            default=None,
            help="plan: the tape to cut (default: one with findings, else the longest)",
        )
        parser.add_argument("--all", action="store_true", help="plan: do not fold long lists")
        parser.add_argument(
            "--format", choices=("text", "json"), default="text", help="output format (default: %(default)s)"
        )
        add_probe_options(parser)
        parser.add_argument(
            "args", nargs=argparse.REMAINDER, metavar="ARGS", help="with --run: the script's arguments"
        )

    def parse_args(self, parser: CommandParser, argv: Sequence[str]) -> argparse.Namespace:
        argv = list(argv)
        if "--run" in split_program(parser, argv)[0]:
            args = parse_program_args(parser, argv, "target")  # SCRIPT.py or -m MODULE, then its args
        else:
            at = _first_positional(parser, argv)
            if at < len(argv) and "--run" not in argv[:at]:
                # a plan: options may follow TRACE (only a script's own arguments come after it)
                argv = [*argv[:at], *argv[at + 1 :], argv[at]]
            args = parser.parse_args(argv)
            if args.module is not None and not args.run:
                raise UsageError("bisect: -m MODULE: only with --run (a plan reads a TRACE)")
            if args.target is None:
                parser.error("the following arguments are required: TRACE | SCRIPT.py")
            if not args.run:
                if args.args:
                    parser.error(f"unrecognized arguments: {' '.join(args.args)}")
                used = [f"--{name}" for name in _PROBE_ONLY if getattr(args, name) is not None]
                if used:
                    raise UsageError(f"bisect: {', '.join(used)}: only with --run (a plan measures nothing)")
        if args.run and (args.tape is not None or args.all):
            raise UsageError(
                "bisect --run cuts the tape of the measured backward; --tape and --all are for plans"
            )
        return args

    def run(self, args: argparse.Namespace, parser: CommandParser) -> int:
        if args.run:
            return run_probe(args, args.target, args.args, cuts=True, command="bisect")
        from warptrace.analysis.bisect import choose_recording, make_plan
        from warptrace.analysis.model import Model
        from warptrace.analysis.report import analyze_trace
        from warptrace.report import bisect as bisect_report

        trace = load_trace(args.target)
        findings = analyze_trace(trace).findings
        model = Model(trace)
        plan = make_plan(model, choose_recording(model, findings, args.tape), findings)
        if args.format == "json":
            write_stdout(bisect_report.render_json(plan))
        else:
            write_stdout(bisect_report.render_text(plan, trace.meta.get("cwd"), show_all=args.all))
        return 0


def _first_positional(parser: CommandParser, argv: list[str]) -> int:
    index = 0
    while index < len(argv):
        arg = argv[index]
        if arg == "--":
            return index + 1
        if arg.startswith("-") and arg != "-":
            index += 2 if arg in parser.value_options and "=" not in arg else 1
            continue
        return index
    return len(argv)
