"""``show TRACE``: summarize a trace (tapes, launches, arrays and their aliases)."""

from __future__ import annotations

import argparse
import sys

from warptrace.commands.base import Command, CommandParser, load_trace


class ShowCommand(Command):
    name = "show"
    help = "summarize a trace: tapes, launches, arrays and their aliases"
    exit_status = ("0 shown, 2 usage error or unreadable trace",)

    def prepare_parser(self, parser: CommandParser) -> None:
        parser.add_argument("trace", metavar="TRACE", help="a .wtrace directory")
        parser.add_argument("--all", action="store_true", help="do not fold long sections")
        parser.add_argument(
            "--numerics",
            action="store_true",
            help="the gradient health timeline instead: loss and leaf gradient norms per backward "
            "(traces recorded with --check-numerics)",
        )

    def run(self, args: argparse.Namespace, parser: CommandParser) -> int:
        trace = load_trace(args.trace)
        if args.numerics:
            from warptrace.analysis.health import health_timeline
            from warptrace.analysis.report import build_model
            from warptrace.report.health import render_health

            series = health_timeline(build_model(trace))
            sys.stdout.write(
                render_health(series, has_numerics="numerics" in trace.tables, show_all=args.all)
            )
            return 0
        from warptrace.report.show import render

        sys.stdout.write(render(trace, show_all=args.all))
        return 0
