"""``diff BEFORE AFTER``: what a change did, from two traces (no Warp needed)."""

from __future__ import annotations

import argparse

from warptrace.commands.analyze import trace_notes
from warptrace.commands.base import Command, CommandParser, load_trace, write_stdout


class DiffCommand(Command):
    name = "diff"
    help = "compare two runs (before and after a fix): findings resolved, what changed"
    exit_status = (
        "0 no new error, 1 AFTER has error findings BEFORE did not, 2 usage error or unreadable trace",
    )

    def prepare_parser(self, parser: CommandParser) -> None:
        from warptrace.report.diff import FORMATS

        parser.add_argument("before", metavar="BEFORE", help="trace of the run before the change")
        parser.add_argument("after", metavar="AFTER", help="trace of the run after the change")
        parser.add_argument(
            "--format", choices=FORMATS, default="text", help="output format (default: %(default)s)"
        )

    def run(self, args: argparse.Namespace, parser: CommandParser) -> int:
        from warptrace.analysis.diff import diff_traces
        from warptrace.report.diff import render

        before = load_trace(args.before)
        after = load_trace(args.after)
        for trace in (before, after):
            trace_notes(trace)
        diff = diff_traces(before, after)
        write_stdout(render(diff, args.format))
        return diff.exit_code()
