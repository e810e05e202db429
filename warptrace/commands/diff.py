"""``diff BEFORE AFTER``: what a change did, from two traces (no Warp needed)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from warptrace.commands.analyze import trace_notes
from warptrace.commands.base import Command, CommandParser, load_trace, write_stdout

if TYPE_CHECKING:  # the reader imports pyarrow: not for a usage error
    from warptrace.trace.reader import Trace


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

        def loader(path: str) -> Callable[[], Trace]:
            def load() -> Trace:
                trace = load_trace(path)
                trace_notes(trace)
                return trace

            return load

        # each run is read when it is analyzed: BEFORE's tables are gone before AFTER's are read
        diff = diff_traces(loader(args.before), loader(args.after))
        write_stdout(render(diff, args.format))
        return diff.exit_code()
