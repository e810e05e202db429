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

    def run(self, args: argparse.Namespace, parser: CommandParser) -> int:
        from warptrace.report.show import render

        sys.stdout.write(render(load_trace(args.trace), show_all=args.all))
        return 0
