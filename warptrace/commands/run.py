"""The default command: ``python -m warptrace [options] SCRIPT.py ARGS`` / ``-m MODULE ARGS``.

Records one run of the program, exactly as ``python`` would run it, then prints a
summary and the findings to stderr. Everything after the program belongs to the
program (``warptrace prog.py --help`` is prog's help): :func:`split_program`
cuts the command line at the program before argparse sees it. That is argparse's
``nargs=REMAINDER`` done by hand because REMAINDER drops a ``--`` that follows the
script (Python passes it on) and lets ``-mMODULE`` be followed by our own options.
Which options take a value comes from the parser itself.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from warptrace import __version__
from warptrace.commands.base import PROG, Command, CommandParser, flush_stdout, write_file, write_stderr
from warptrace.errors import UsageError, WarptraceError
from warptrace.progress import Progress
from warptrace.report import render
from warptrace.trace.schedule import parse_last, parse_steps

MODULE_OPTION = "-m"


@dataclass
class RunOptions:
    """Parsed ``warptrace [options] SCRIPT.py ARGS`` / ``-m MODULE ARGS``."""

    target: str
    args: list[str] = field(default_factory=list)
    as_module: bool = False
    output: str | None = None
    quiet: bool = False
    analyze: bool = True
    numerics: bool = False
    html: str | None = None
    record_steps: str | None = None
    record_last: int | None = None


def split_program(parser: CommandParser, argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``argv`` as (our options, the program and its arguments); the program is the
    first word that is not an option or an option's value, ``-m``/``-mMODULE`` included."""
    index = 0
    while index < len(argv):
        word = argv[index]
        if word == "--":
            return list(argv[:index]), list(argv[index + 1 :])
        if word == "-" or not word.startswith("-") or word.startswith(MODULE_OPTION):
            return list(argv[:index]), list(argv[index:])
        name = word.partition("=")[0]
        if name in parser.value_options and "=" not in word:
            index += 2
        elif name in parser.option_names:
            index += 1
        elif not word.startswith("--") and word[:2] in parser.value_options:
            index += 1  # -oPATH
        else:
            return list(argv[: index + 1]), list(argv[index + 1 :])  # argparse names it
    return list(argv), []


def program_of(parser: CommandParser, program: Sequence[str]) -> tuple[str, list[str], bool]:
    """The second half of :func:`split_program` as (script or module, its arguments, is a module)."""
    if not program:
        raise UsageError(f"nothing to run: give a SCRIPT.py or -m MODULE (see '{parser.prog} --help')")
    first = program[0]
    if first.startswith(MODULE_OPTION):
        module, rest = first[len(MODULE_OPTION) :], list(program[1:])
        if not module:
            if not rest:
                raise UsageError(f"-m needs a MODULE (see '{parser.prog} --help')")
            module, rest = rest[0], rest[1:]
        return module, rest, True
    if first in parser.siblings:
        raise UsageError(f"'{first}' is a command: put it first ({PROG} {first} ...)")
    return first, list(program[1:]), False


class RunCommand(Command):
    name = "run"
    help = "run a program under the recorder (the default: no command word)"
    exit_status = ("the program's own exit status (2 if it cannot be started)",)

    def prepare_parser(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--version",
            action="version",
            version=f"warptrace {__version__}",
            help="show warptrace's version and exit",
        )
        parser.add_argument(
            "-o",
            "--output",
            metavar="PATH",
            help="trace directory to write (default: <script name>.wtrace)",
        )
        parser.add_argument(
            "-q", "--quiet", action="store_true", help="no summary lines (findings are still printed)"
        )
        parser.add_argument(
            "--no-analyze",
            dest="analyze",
            action="store_false",
            help="do not analyze the trace after the run",
        )
        parser.add_argument("--html", metavar="PATH", help="also write the HTML report of the run to PATH")
        parser.add_argument(
            "--check-numerics",
            dest="numerics",
            action="store_true",
            help="also summarize the values every launch, copy and memset writes (NaN origins, "
            "custom adjoints, dead gradients, unconverged solves: WT501-WT504; `show --numerics`); slower",
        )
        parser.add_argument(
            "--record-steps",
            metavar="STEPS",
            help="record only these steps of a long run, e.g. 0-4,100-104 (N, A-B, A-; a step is counted "
            "by tape.backward() calls); allocations and array identity are still tracked in between",
        )
        parser.add_argument(
            "--record-last",
            metavar="K",
            help="flight recorder: keep the last K steps in memory and write them when the run ends "
            "(with --check-numerics: at the end of the step where a value first became non-finite)",
        )
        parser.add_argument(
            MODULE_OPTION,
            dest="module",
            metavar="MODULE",
            help="run a module, like `python -m MODULE` (the rest of the line is its arguments)",
        )
        parser.add_argument(
            "script", metavar="SCRIPT.py", nargs="?", help="the program to run (options go before it)"
        )
        parser.add_argument("args", metavar="ARGS", nargs=argparse.REMAINDER, help="the program's arguments")

    def parse_args(self, parser: CommandParser, argv: Sequence[str]) -> argparse.Namespace:
        own, program = split_program(parser, argv)
        for word in own:
            name = word.partition("=")[0]
            known = name in parser.option_names or word[:2] in parser.value_options
            if word.startswith("-") and not known:
                owners = parser.elsewhere.get(name)
                if owners:
                    raise UsageError(
                        f"{name} is an option of {'/'.join(f'warptrace {o}' for o in owners)!r}, "
                        "not of a run (a run exits with the program's own status)"
                    )
                raise UsageError(
                    f"unknown option {word} (options for the program go after its name; see '{PROG} --help')"
                )
        args = parser.parse_args(own)
        if args.output == "":
            raise UsageError(f"-o/--output needs a non-empty PATH (see '{PROG} --help')")
        if args.html == "":
            raise UsageError(f"--html needs a non-empty PATH (see '{PROG} --help')")
        target, rest, as_module = program_of(parser, program)
        record_last = None
        if args.record_steps is not None:
            parse_steps(args.record_steps)  # a bad schedule is a usage error before the run
        if args.record_last is not None:
            record_last = parse_last(args.record_last)
            if args.record_steps is not None:
                raise UsageError("--record-steps and --record-last cannot be combined")
        return argparse.Namespace(
            options=RunOptions(
                target, rest, as_module, args.output, args.quiet, args.analyze, args.numerics, args.html,
                args.record_steps, record_last,
            )
        )  # fmt: skip

    def run(self, args: argparse.Namespace, parser: CommandParser) -> int:
        return run_command(args.options)


def run_command(options: RunOptions) -> int:
    """Record one run of the program; the exit status is the program's own.

    Order matters: everything that can fail on bad input happens before the recorder
    starts (no trace is written for a typo), and once it has started it is stopped
    whatever ends the program, so the trace on disk is complete."""
    from warptrace.runner import ScriptRunner

    runner = ScriptRunner(options.target, options.args, as_module=options.as_module)
    runner.prepare()
    output = options.output or f"{runner.name}.wtrace"
    check_output(output)
    recorder = import_recorder()

    # Absolute: the program may chdir, and the recorder writes parts as the run goes.
    trace_file = os.path.abspath(output)
    try:
        extra: dict[str, Any] = {"numerics": True} if options.numerics else {}
        if options.record_steps is not None:
            extra["record_steps"] = options.record_steps
        if options.record_last is not None:
            extra["record_last"] = options.record_last
        recorder.start(trace_file, argv=runner.command, script=options.target, **extra)
    except OSError as exc:  # the trace folder cannot be created or written
        raise WarptraceError(f"cannot write the trace {output}: {exc.strerror or exc}") from None
    exit_status: int | None = None
    error: str | None = None
    try:
        result = runner.run()
        exit_status, error = result.exit_status, result.error
    except WarptraceError as exc:  # -m named a missing submodule
        exit_status, error = exc.exit_code, str(exc)
        raise
    except BaseException as exc:
        error = f"warptrace: {type(exc).__name__}: {exc}"
        raise
    finally:
        with _deferred_sigint():
            recorder.stop(exit_status=exit_status, error=error)

    finish_run(recorder, trace_file, output, quiet=options.quiet, analyze=options.analyze, html=options.html)
    return exit_status if exit_status is not None else 0


def finish_run(
    recorder: Any, trace_file: str, output: str, *, quiet: bool, analyze: bool, html: str | None = None
) -> None:
    """After the recorder stopped: the summary, the findings and the HTML report, on stderr.

    Shared by ``python -m warptrace script.py`` and ``import warptrace.auto``, so both
    print the same thing."""
    flush_stdout()
    summary = getattr(recorder, "last_summary", None)
    counts = _summary_counts(summary, trace_file)
    if not quiet:
        _print_summary(counts, output)
    recorder_errors = (summary or {}).get("recorder_errors")
    if recorder_errors:
        write_stderr(
            f"warptrace: the recorder hit {recorder_errors} internal error(s); the trace may miss "
            f"events (details under recorder_errors in {os.path.join(output, 'meta.json')})"
        )
    if (analyze or html) and counts is not None and _has_activity(counts):
        _analyze_after_run(trace_file, output, quiet=quiet, show=analyze, html=html)


def check_output(output: str) -> None:
    """Refuse to write a trace over something that is not a trace (the writer clears folders)."""
    if not os.path.exists(output):
        return
    if not os.path.isdir(output):
        raise UsageError(f"output {output} exists and is not a trace directory (choose another -o)")
    from warptrace.trace.schema import META_FILE

    if os.listdir(output) and not os.path.isfile(os.path.join(output, META_FILE)):
        raise UsageError(
            f"output {output} is a directory but not a warptrace trace; refusing to overwrite it"
        )


def import_recorder() -> Any:
    try:
        from warptrace.record import recorder
    except ImportError as exc:
        missing = exc.name or ""
        if missing.partition(".")[0] in ("warp", "numpy"):
            raise WarptraceError(
                f"recording needs {missing.partition('.')[0]}, which cannot be imported ({exc}); "
                "install it (pip install warp-lang)"
            ) from None
        raise
    return recorder


@contextmanager
def _deferred_sigint() -> Iterator[None]:
    """Hold a Ctrl-C while the trace is finished on disk, then deliver it.

    A second Ctrl-C during the final flush would otherwise leave the trace incomplete
    exactly when the user most wants to read it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    except (ValueError, OSError):
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
    if received:
        raise KeyboardInterrupt


def _summary_counts(summary: Mapping[str, Any] | None, trace_file: str) -> dict[str, Any] | None:
    """The recorder's counts; any it does not provide are counted from the trace on disk."""
    from warptrace.report.counts import COUNT_NOUNS

    counts = {key: (summary or {}).get(key) for key, _, _ in COUNT_NOUNS}
    if all(value is not None for value in counts.values()):
        return counts
    try:
        from warptrace.report.show import activity_counts
        from warptrace.trace.reader import read_trace

        on_disk = activity_counts(read_trace(trace_file))
    except WarptraceError as exc:
        write_stderr(f"warptrace: the trace cannot be read back: {exc}")
        return None
    return {key: on_disk[key] if value is None else value for key, value in counts.items()}


def _has_activity(counts: Mapping[str, Any]) -> bool:
    from warptrace.report.counts import has_activity

    return has_activity(counts)


def _print_summary(counts: Mapping[str, Any] | None, trace_path: str) -> None:
    """One or two lines; ``trace_path`` as the user gave it (the program may have changed cwd)."""
    from warptrace.report.counts import format_counts

    if counts is None:
        write_stderr(f"warptrace: trace written to {trace_path}")
    elif not _has_activity(counts):
        write_stderr(
            "warptrace: no Warp activity was recorded (no launches, copies, memsets, tapes or arrays); "
            f"trace written to {trace_path}"
        )
    else:
        write_stderr(f"warptrace: {format_counts(counts)}")
        write_stderr(f"warptrace: trace written to {trace_path}")


def _analyze_after_run(
    trace_file: str, trace_path: str, *, quiet: bool, show: bool, html: str | None
) -> None:
    """Findings after a run, to stderr so the program's stdout stays its own.

    The run already succeeded and its trace is on disk: whatever goes wrong here is one
    note, never a traceback, and never changes the exit status."""
    hint = f"run '{PROG} analyze {trace_path}' later"
    try:
        from warptrace.analysis.pages import reuse_freed_memory
        from warptrace.analysis.report import analyze_trace
        from warptrace.trace.reader import read_trace

        reuse_freed_memory()  # the program has ended: the process is ours
        with Progress(f"analyzing {trace_path}") as progress:
            report = analyze_trace(read_trace(trace_file), progress)
        if html:
            write_file(html, render(report, "html"))
            if not quiet:
                write_stderr(f"warptrace: HTML report written to {html}")
        if not show or (quiet and not report.findings):
            return
        text = render(report, "text")
    except ImportError as exc:
        write_stderr(f"warptrace: analysis unavailable ({exc}); {hint}")
        return
    except KeyboardInterrupt:
        write_stderr(f"warptrace: analysis interrupted; the trace is complete: {hint}")
        return
    except WarptraceError as exc:  # the HTML report cannot be written
        write_stderr(f"warptrace: {exc}")
        return
    except Exception as exc:
        write_stderr(f"warptrace: analysis failed ({type(exc).__name__}: {exc}); the trace is intact: {hint}")
        return
    flush_stdout()
    stream = sys.stderr
    if stream is not None:
        stream.write(text if text.endswith("\n") else text + "\n")
        stream.flush()
