"""Command line: ``python -m warptrace [options] script.py args`` and the subcommands.

``main(argv) -> int`` is the whole CLI (coverage's ``cmdline.main`` is the model): it
turns warptrace's own errors into one ``warptrace: error: ...`` line and their exit
status, and keeps tracebacks for warptrace's bugs only. Running a program is the
default; ``analyze``, ``show``, ``diff`` and ``bisect`` as first word are subcommands
(a program is always a ``.py`` file or ``-m MODULE``, so there is no ambiguity).

Run options are parsed by hand and only before the program: everything after it belongs
to the program, exactly as with ``python`` (``warptrace prog.py --help`` is prog's help).
Heavy imports (the recorder imports Warp, the analyzer, pyarrow) happen only on the path
that needs them, so usage errors are instant and ``analyze`` works without Warp.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, NoReturn

from warptrace.errors import UsageError, WarptraceError

PROG = "python -m warptrace"
SUBCOMMANDS = ("analyze", "show", "diff", "bisect")
INTERNAL_ERROR_STATUS = 3  # distinct from 1 (findings / the program failed) and 2 (usage)

HELP = f"""\
usage: {PROG} [options] SCRIPT.py [ARGS ...]
       {PROG} [options] -m MODULE [ARGS ...]
       {PROG} analyze TRACE [--format text|json] [--fail-on error|warning|info]
       {PROG} show TRACE [--all]
       {PROG} diff BEFORE AFTER        (not implemented yet)
       {PROG} bisect TRACE             (not implemented yet)

Record what an NVIDIA Warp program does and find its gradient bugs.

Running a program (the default): SCRIPT.py runs exactly as `python SCRIPT.py ARGS`
would (same sys.argv, __main__, sys.path[0], working directory, output, tracebacks and
exit status). Everything after SCRIPT.py or -m MODULE belongs to the program. The trace
is written to SCRIPT.wtrace in the current directory; a summary and the findings are
printed to stderr.

options (only before SCRIPT.py / -m MODULE):
  -o, --output PATH  trace directory to write (default: <script name>.wtrace)
  -q, --quiet        no summary lines (findings are still printed)
  --no-analyze       do not analyze the trace after the run
  -m MODULE          run a module, like `python -m MODULE`
  -h, --help         show this help and exit
  --version          show warptrace's version and exit

subcommands:
  analyze TRACE      analyze a trace offline (no Warp needed) and print the findings
  show TRACE         summarize a trace: tapes, launches, arrays and their aliases
  diff A B           compare two traces (not implemented yet)
  bisect TRACE       plan finite-difference bisection (not implemented yet)

exit status:
  run        the program's own exit status (2 if it cannot be started)
  analyze    0 no finding at or above --fail-on, 1 findings, 2 usage error or unreadable trace
  any        3 internal error (a warptrace bug: please report it with the traceback)
"""

USAGE_HINT = f"see '{PROG} --help'"


class _Exit(Exception):
    """argparse asked to exit (``--help``): carries the status instead of raising SystemExit."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


# --------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``) and return the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args and args[0] in SUBCOMMANDS:
            return _SUBCOMMANDS[args[0]](args[1:])
        return run_command(_parse_run(args))
    except _Exit as exc:
        return exc.status
    except WarptraceError as exc:
        _error(str(exc))
        return exc.exit_code
    except BrokenPipeError:
        # Whoever read our output went away (`show | head`): no traceback, and no second
        # error when Python flushes stdout at exit.
        with suppress(OSError, ValueError, AttributeError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        _flush_stdout()
        _stderr("warptrace: interrupted")
        return 130
    except Exception as exc:
        _flush_stdout()
        _stderr(
            f"warptrace: internal error: {type(exc).__name__}: {exc} (a warptrace bug; traceback follows)"
        )
        traceback.print_exc()
        return INTERNAL_ERROR_STATUS


def main_entry() -> None:
    """Console-script entry point (``warptrace ...``)."""
    sys.exit(main())


def _error(message: str) -> None:
    one_line = " ".join(part.strip() for part in message.splitlines() if part.strip())
    _flush_stdout()
    _stderr(f"warptrace: error: {one_line}")


def _stderr(line: str) -> None:
    stream = sys.stderr or sys.__stderr__
    if stream is None:
        return
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def _flush_stdout() -> None:
    """Keep our stderr lines after whatever the program printed."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except (OSError, ValueError):
        pass


# ---------------------------------------------------------------------------- run


@dataclass
class RunOptions:
    """Parsed ``warptrace [options] SCRIPT.py ARGS`` / ``-m MODULE ARGS``."""

    target: str
    args: list[str] = field(default_factory=list)
    as_module: bool = False
    output: str | None = None
    quiet: bool = False
    analyze: bool = True


def _parse_run(argv: list[str]) -> RunOptions:
    """Options are recognized only before the program; the rest is the program's."""
    output: str | None = None
    quiet = False
    analyze = True
    index = 0
    while index < len(argv):
        arg = argv[index]
        if arg == "--":
            index += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        if arg in ("-h", "--help"):
            sys.stdout.write(HELP)
            raise _Exit(0)
        if arg == "--version":
            from warptrace import __version__

            sys.stdout.write(f"warptrace {__version__}\n")
            raise _Exit(0)
        if arg in ("-q", "--quiet"):
            quiet = True
        elif arg == "--no-analyze":
            analyze = False
        elif arg in ("-o", "--output"):
            index += 1
            if index >= len(argv):
                raise UsageError(f"{arg} needs a PATH ({USAGE_HINT})")
            output = argv[index]
        elif arg.startswith("--output="):
            output = arg.partition("=")[2]
        elif arg.startswith("-o"):
            output = arg[2:]
        elif arg == "-m" or arg.startswith("-m"):
            module = arg[2:]
            if not module:
                index += 1
                if index >= len(argv):
                    raise UsageError(f"-m needs a MODULE ({USAGE_HINT})")
                module = argv[index]
            return RunOptions(module, argv[index + 1 :], True, output, quiet, analyze)
        elif arg.partition("=")[0] in ("--fail-on", "--format", "--all"):
            option = arg.partition("=")[0]
            raise UsageError(
                f"{option} is an option of 'warptrace analyze'/'show', not of a run "
                "(a run exits with the program's own status)"
            )
        else:
            raise UsageError(
                f"unknown option {arg} (options for the program go after its name; {USAGE_HINT})"
            )
        if output == "":
            raise UsageError(f"-o/--output needs a non-empty PATH ({USAGE_HINT})")
        index += 1
    if index >= len(argv):
        raise UsageError(f"nothing to run: give a SCRIPT.py or -m MODULE ({USAGE_HINT})")
    target = argv[index]
    if target in SUBCOMMANDS:
        raise UsageError(f"'{target}' is a subcommand: put it first ({PROG} {target} ...)")
    return RunOptions(target, argv[index + 1 :], False, output, quiet, analyze)


def run_command(options: RunOptions) -> int:
    """Record one run of the program; the exit status is the program's own.

    Order matters: everything that can fail on bad input happens before the recorder
    starts (no trace is written for a typo), and once it has started it is stopped
    whatever ends the program, so the trace on disk is complete."""
    from warptrace.runner import ScriptRunner

    runner = ScriptRunner(options.target, options.args, as_module=options.as_module)
    runner.prepare()
    output = options.output or f"{runner.name}.wtrace"
    _check_output(output)
    recorder = _import_recorder()

    # Absolute: the program may chdir, and the recorder writes parts as the run goes.
    trace_file = os.path.abspath(output)
    try:
        recorder.start(trace_file, argv=runner.command, script=options.target)
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

    _flush_stdout()
    summary = getattr(recorder, "last_summary", None)
    counts = _summary_counts(summary, trace_file)
    if not options.quiet:
        _print_summary(counts, output)
    recorder_errors = (summary or {}).get("recorder_errors")
    if recorder_errors:
        _stderr(
            f"warptrace: the recorder hit {recorder_errors} internal error(s); the trace may miss "
            f"events (details under recorder_errors in {os.path.join(output, 'meta.json')})"
        )
    if options.analyze and counts is not None and _has_activity(counts):
        _analyze_after_run(trace_file, output, quiet=options.quiet)
    return exit_status if exit_status is not None else 0


def _check_output(output: str) -> None:
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


def _import_recorder() -> Any:
    try:
        from warptrace.record import recorder
    except ImportError as exc:
        missing = exc.name or ""
        if missing.partition(".")[0] in ("warp", "wrapt", "numpy"):
            raise WarptraceError(
                f"recording needs {missing.partition('.')[0]}, which cannot be imported ({exc}); "
                "install it (pip install warp-lang wrapt)"
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
    from warptrace.report.show import COUNT_NOUNS

    counts = {key: (summary or {}).get(key) for key, _, _ in COUNT_NOUNS}
    if all(value is not None for value in counts.values()):
        return counts
    try:
        from warptrace.report.show import activity_counts
        from warptrace.trace.reader import read_trace

        on_disk = activity_counts(read_trace(trace_file))
    except WarptraceError as exc:
        _stderr(f"warptrace: the trace cannot be read back: {exc}")
        return None
    return {key: on_disk[key] if value is None else value for key, value in counts.items()}


def _has_activity(counts: Mapping[str, Any]) -> bool:
    from warptrace.report.show import has_activity

    return has_activity(counts)


def _print_summary(counts: Mapping[str, Any] | None, trace_path: str) -> None:
    """One or two lines; ``trace_path`` as the user gave it (the program may have changed cwd)."""
    from warptrace.report.show import format_counts

    if counts is None:
        _stderr(f"warptrace: trace written to {trace_path}")
    elif not _has_activity(counts):
        _stderr(
            "warptrace: no Warp activity was recorded (no launches, copies, memsets, tapes or arrays); "
            f"trace written to {trace_path}"
        )
    else:
        _stderr(f"warptrace: {format_counts(counts)}")
        _stderr(f"warptrace: trace written to {trace_path}")


def _analyze_after_run(trace_file: str, trace_path: str, *, quiet: bool) -> None:
    """Findings after a run, to stderr so the program's stdout stays its own.

    The run already succeeded and its trace is on disk: whatever goes wrong here is one
    note, never a traceback, and never changes the exit status."""
    hint = f"run '{PROG} analyze {trace_path}' later"
    try:
        from warptrace.analysis.report import analyze_trace
        from warptrace.trace.reader import read_trace

        report = analyze_trace(read_trace(trace_file))
        if quiet and not report.findings:
            return
        from warptrace.report.text import render

        text = render(report)
    except ImportError as exc:
        _stderr(f"warptrace: analysis unavailable ({exc}); {hint}")
        return
    except KeyboardInterrupt:
        _stderr(f"warptrace: analysis interrupted; the trace is complete: {hint}")
        return
    except Exception as exc:
        _stderr(f"warptrace: analysis failed ({type(exc).__name__}: {exc}); the trace is intact: {hint}")
        return
    _flush_stdout()
    stream = sys.stderr
    if stream is not None:
        stream.write(text if text.endswith("\n") else text + "\n")
        stream.flush()


# -------------------------------------------------------------------- subcommands


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as UsageError (one line, exit 2) instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog.rpartition(' ')[2]}: {message} (see '{self.prog} --help')")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            _stderr(message.rstrip("\n"))
        raise _Exit(status)


def _analyze_command(argv: list[str]) -> int:
    parser = _Parser(prog=f"{PROG} analyze", description="Analyze a trace offline and print the findings.")
    parser.add_argument("trace", metavar="TRACE", help="a .wtrace directory")
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (default: text)"
    )
    parser.add_argument(
        "--fail-on",
        choices=("error", "warning", "info"),
        default="error",
        help="exit 1 when a finding of this severity or worse exists (default: error)",
    )
    options = parser.parse_args(argv)

    from warptrace.analysis.findings import Severity
    from warptrace.trace.reader import read_trace

    trace = read_trace(options.trace)
    _trace_notes(trace)
    from warptrace.analysis.report import analyze_trace

    if options.format == "json":
        from warptrace.report.json import render
    else:
        from warptrace.report.text import render

    report = analyze_trace(trace)
    text = render(report)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return int(report.exit_code(Severity.parse(options.fail_on)))


def _trace_notes(trace: Any) -> None:
    """What the findings cannot say: the trace is partial, or there was nothing to record."""
    from warptrace.report.show import activity_counts, has_activity

    if not trace.complete:
        _stderr(
            f"warptrace: note: {trace.path} is incomplete (the run was killed?); analyzing up to its last flush"
        )
    if not has_activity(activity_counts(trace)):
        _stderr(
            f"warptrace: note: {trace.path} holds no Warp activity (no launches, copies, memsets, tapes or arrays); nothing to analyze"
        )


def _show_command(argv: list[str]) -> int:
    parser = _Parser(prog=f"{PROG} show", description="Summarize a trace: tapes, launches, arrays.")
    parser.add_argument("trace", metavar="TRACE", help="a .wtrace directory")
    parser.add_argument("--all", action="store_true", help="do not fold long sections")
    options = parser.parse_args(argv)

    from warptrace.report.show import render
    from warptrace.trace.reader import read_trace

    sys.stdout.write(render(read_trace(options.trace), show_all=options.all))
    return 0


def _not_implemented(name: str) -> Any:
    def command(argv: list[str]) -> int:
        if argv[:1] in (["-h"], ["--help"]):
            sys.stdout.write(HELP)
            return 0
        raise UsageError(f"'{name}' is not implemented yet")

    return command


_SUBCOMMANDS = {
    "analyze": _analyze_command,
    "show": _show_command,
    "diff": _not_implemented("diff"),
    "bisect": _not_implemented("bisect"),
}
