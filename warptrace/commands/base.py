"""What every command shares: the :class:`Command` shape, the argparse parser that turns
usage errors into :class:`~warptrace.errors.UsageError`, and writing to stderr safely.

A command is one class (memray's ``commands/`` style): ``name`` and ``help`` for the
generated help, ``prepare_parser(parser)`` to declare its arguments, ``run(args, parser)``
returning the exit status, and ``exit_status`` lines for the help's exit-status section.
Commands import their heavy dependencies (Warp, pyarrow, the analyzer) in ``run`` only,
so that building every parser for the help, or failing on a usage error, stays instant.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from typing import Any, NoReturn

from warptrace.errors import TraceWarning, UsageError, WarptraceError

PROG = "python -m warptrace"


class ParserExit(Exception):
    """argparse asked to exit (``--help``, ``--version``): carries the status instead of SystemExit."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class CommandParser(argparse.ArgumentParser):
    """argparse that reports usage errors as UsageError (one line, exit 2) instead of exiting.

    ``option_names`` records the option strings given to :meth:`add_argument`, and
    ``value_options`` those that take a value: the run command cuts its command line at
    the program with them, and names the command an option misplaced before a program
    belongs to."""

    def __init__(self, *, command: str = "", **kwargs: Any) -> None:
        self.command = command
        self.option_names: set[str] = set()  # before argparse's __init__, which adds -h
        self.value_options: set[str] = set()
        # Set on the default command's parser: the other commands, and which of them has an option.
        self.siblings: tuple[str, ...] = ()
        self.elsewhere: dict[str, list[str]] = {}
        super().__init__(**kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.option_names.update(action.option_strings)
        if action.nargs != 0:
            self.value_options.update(action.option_strings)
        return action

    def error(self, message: str) -> NoReturn:
        where = f"{self.command}: " if self.command else ""
        raise UsageError(f"{where}{message} (see '{self.prog} --help')")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            write_stderr(message.rstrip("\n"))
        raise ParserExit(status)


class Command:
    """One subcommand. Subclasses set the class attributes and implement the two methods."""

    name: str = ""
    help: str = ""  # one line, shown in the command list of ``--help``
    exit_status: tuple[str, ...] = ()  # lines of the help's exit-status section

    def prepare_parser(self, parser: CommandParser) -> None:
        raise NotImplementedError

    def parse_args(self, parser: CommandParser, argv: Sequence[str]) -> argparse.Namespace:
        return parser.parse_args(argv)

    def run(self, args: argparse.Namespace, parser: CommandParser) -> int:
        raise NotImplementedError


def write_stderr(line: str) -> None:
    """One line to stderr; silent when stderr is gone (closed, replaced by None)."""
    stream = sys.stderr or sys.__stderr__
    if stream is None:
        return
    try:
        stream.write(line + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def load_trace(path: str, seq_range: tuple[int, int] | None = None) -> Any:
    """``read_trace``; the damage it tolerates in an incomplete trace (``TraceWarning``) is
    written as ``warptrace: warning:`` lines instead of Python's warning format."""
    from warptrace.analysis.pages import reuse_freed_memory
    from warptrace.trace.reader import read_trace  # lazy: pyarrow only for commands that read a trace

    reuse_freed_memory()  # this process is the command's
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        trace = read_trace(path, seq_range=seq_range)
    for warning in trace.warnings:
        write_stderr(f"warptrace: warning: {warning}")
    return trace


def flush_stdout() -> None:
    """Keep our stderr lines after whatever the program printed."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except (OSError, ValueError):
        pass


def write_file(path: str, text: str) -> None:
    """``text`` to the file ``path``; a path that cannot be written is a one-line error."""
    try:
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as exc:
        raise WarptraceError(f"cannot write {path}: {exc.strerror or exc}") from None


def write_stdout(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
