"""``export TRACE --perfetto OUT.json``: the run as a timeline for the Perfetto UI and chrome://tracing."""

from __future__ import annotations

import argparse

from warptrace.commands.analyze import trace_notes
from warptrace.commands.base import Command, CommandParser, load_trace, write_stderr
from warptrace.errors import WarptraceError
from warptrace.progress import Progress


class ExportCommand(Command):
    name = "export"
    help = "write a trace as a timeline for the Perfetto UI or chrome://tracing (no Warp needed)"
    exit_status = ("0 written, 2 usage error, unreadable trace or unwritable output",)

    def prepare_parser(self, parser: CommandParser) -> None:
        parser.add_argument("trace", metavar="TRACE", help="a .wtrace directory")
        parser.add_argument(
            "--perfetto",
            metavar="OUT.json",
            required=True,
            help="Chrome trace-event JSON to write: a track per tape, findings as instants with flows",
        )

    def run(self, args: argparse.Namespace, parser: CommandParser) -> int:
        from warptrace.analysis.report import analyze_trace, build_model
        from warptrace.report import perfetto

        with Progress(f"exporting {args.trace}") as progress:
            progress.update("reading the trace")
            trace = load_trace(args.trace)
            trace_notes(trace)
            report = analyze_trace(trace, progress)  # the findings become instants and flows
            # (a trace recorded in several windows is analyzed per window: draw the whole trace)
            model = report.model if report.model is not None else build_model(trace)
            try:
                with open(args.perfetto, "w", encoding="utf-8") as out:
                    count = perfetto.write(model, report.findings, out, progress)
            except OSError as exc:
                raise WarptraceError(f"cannot write {args.perfetto}: {exc.strerror or exc}") from None
        write_stderr(
            f"warptrace: {count:,} trace events written to {args.perfetto} (open it in ui.perfetto.dev)"
        )
        return 0
