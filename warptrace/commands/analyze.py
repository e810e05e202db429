"""``analyze TRACE``: analyze a trace offline (no Warp needed) and print the findings."""

from __future__ import annotations

import argparse
from typing import Any

from warptrace.analysis.findings import Severity
from warptrace.commands.base import Command, CommandParser, load_trace, write_file, write_stderr, write_stdout
from warptrace.progress import Progress
from warptrace.report import FORMATS, render


class AnalyzeCommand(Command):
    name = "analyze"
    help = "analyze a trace offline (no Warp needed) and print the findings"
    exit_status = ("0 no finding at or above --fail-on, 1 findings, 2 usage error or unreadable trace",)

    def prepare_parser(self, parser: CommandParser) -> None:
        parser.add_argument("trace", metavar="TRACE", help="a .wtrace directory")
        parser.add_argument(
            "--format", choices=tuple(FORMATS), default="text", help="output format (default: %(default)s)"
        )
        parser.add_argument(
            "-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout"
        )
        parser.add_argument(
            "--fail-on",
            choices=tuple(severity.label for severity in sorted(Severity, reverse=True)),
            default=Severity.ERROR.label,
            help="exit 1 when a finding of this severity or worse exists (default: %(default)s)",
        )
        parser.add_argument(
            "--steps",
            metavar="STEPS",
            help="analyze only these steps of a full trace, e.g. 0-4,100-104 (as --record-steps would "
            "have recorded them: each window on its own)",
        )
        parser.add_argument(
            "--window",
            type=_window_events,
            metavar="EVENTS",
            help="analyze a long trace window by window, about EVENTS events each (cut between tape "
            "recordings): memory bounded by the window; a finding whose proof spans a cut may be "
            "missed (docs/performance.md); not with --format html",
        )

    def run(self, args: argparse.Namespace, parser: CommandParser) -> int:
        from warptrace.analysis.report import analyze_trace
        from warptrace.trace.schedule import parse_steps

        if args.window is not None:
            if args.format == "html":
                parser.error("--window: the html report draws the whole run; use text, json or sarif")
            if args.steps is not None:
                parser.error("--window and --steps: one or the other")
            return self._windowed(args)
        steps = parse_steps(args.steps, "--steps") if args.steps is not None else None
        with Progress(f"analyzing {args.trace}") as progress:
            progress.update("reading the trace")
            trace = load_trace(args.trace)
            trace_notes(trace)
            report = analyze_trace(trace, progress, steps)
            progress.update(f"writing the {args.format} report")
            text = render(report, args.format)
        if args.output:
            write_file(args.output, text)
        else:
            write_stdout(text)
        return int(report.exit_code(Severity.parse(args.fail_on)))

    def _windowed(self, args: argparse.Namespace) -> int:
        from warptrace.analysis.chunks import analyze_windowed

        with Progress(f"analyzing {args.trace}") as progress:
            progress.update("reading the trace's arrays and kernels")
            head = load_trace(args.trace, seq_range=(0, 0))  # checks the trace, reads no event
            if not head.complete:
                write_stderr(f"warptrace: note: {head.path} is incomplete (the run was killed?); "
                             "analyzing up to its last flush")  # fmt: skip
            report = analyze_windowed(args.trace, args.window, progress)
            progress.update(f"writing the {args.format} report")
            text = render(report, args.format)
        if args.output:
            write_file(args.output, text)
        else:
            write_stdout(text)
        return int(report.exit_code(Severity.parse(args.fail_on)))


def _window_events(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number of events, not {text!r}")
    return value


def trace_notes(trace: Any) -> None:
    """What the findings cannot say: the trace is partial, or there was nothing to record."""
    from warptrace.report.counts import has_activity
    from warptrace.report.show import activity_counts

    if not trace.complete:
        write_stderr(
            f"warptrace: note: {trace.path} is incomplete (the run was killed?); analyzing up to its last flush"
        )
    if not has_activity(activity_counts(trace)):
        write_stderr(
            f"warptrace: note: {trace.path} holds no Warp activity (no launches, copies, memsets, tapes or arrays); nothing to analyze"
        )
