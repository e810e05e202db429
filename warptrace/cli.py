"""Command line: ``python -m warptrace [options] script.py args`` and the commands.

``main(argv) -> int`` is the whole CLI (coverage's ``cmdline.main`` is the model): it
turns warptrace's own errors into one ``warptrace: error: ...`` line and their exit
status, and keeps tracebacks for warptrace's bugs only. Running a program is the
default; a command's name as first word (``analyze``, ``show``: see
:data:`warptrace.commands.COMMANDS`) selects that command instead (a program is always a
``.py`` file or ``-m MODULE``, so there is no ambiguity).

Each command declares its arguments on an argparse parser; the help, usage lines,
command list and exit statuses are generated from the command classes. Heavy imports
(the recorder imports Warp, the analyzer, pyarrow) happen only in a command's ``run``,
so usage errors are instant and ``analyze`` works without Warp.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from contextlib import suppress

from warptrace.commands import COMMANDS, DEFAULT_COMMAND, Command
from warptrace.commands.base import PROG, CommandParser, ParserExit, flush_stdout, write_stderr
from warptrace.errors import WarptraceError

INTERNAL_ERROR_STATUS = 3  # distinct from 1 (findings / the program failed) and 2 (usage)
INTERNAL_ERROR_NOTE = "3 internal error (a warptrace bug: please report it with the traceback)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``) and return the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        by_name = {command.name: command for command in COMMANDS}
        if args and args[0] in by_name:
            command: Command = by_name[args[0]]()
            parser = command_parser(command)
            args = args[1:]
        else:
            command = DEFAULT_COMMAND()
            parser = default_parser(command)
        return command.run(command.parse_args(parser, args), parser)
    except ParserExit as exc:
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
        flush_stdout()
        write_stderr("warptrace: interrupted")
        return 130
    except Exception as exc:
        flush_stdout()
        write_stderr(
            f"warptrace: internal error: {type(exc).__name__}: {exc} (a warptrace bug; traceback follows)"
        )
        traceback.print_exc()
        return INTERNAL_ERROR_STATUS


def main_entry() -> None:
    """Console-script entry point (``warptrace ...``)."""
    sys.exit(main())


def command_parser(command: Command) -> CommandParser:
    """The parser of a named command (``python -m warptrace NAME ...``)."""
    parser = CommandParser(
        prog=f"{PROG} {command.name}",
        command=command.name,
        description=_sentence(command.help),
        epilog=_exit_section([(command.name, line) for line in command.exit_status]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.prepare_parser(parser)
    return parser


def default_parser(command: Command) -> CommandParser:
    """The parser of the default command, whose ``--help`` is warptrace's help: usage lines
    of every command, the command list and every exit status, all from the command classes."""
    others = [(other, command_parser(other())) for other in COMMANDS]
    usage = [
        "%(prog)s [options] SCRIPT.py [ARGS ...]",
        "%(prog)s [options] -m MODULE [ARGS ...]",
        *(_usage_line(parser) for _, parser in others),
    ]
    width = max(len(other.name) for other, _ in others) + 2
    commands = "\n".join(f"  {other.name:<{width}}{other.help}" for other, _ in others)
    statuses = [(command.name, line) for line in command.exit_status]
    for other, _ in others:
        statuses += [(other.name, line) for line in other.exit_status]
    parser = CommandParser(
        prog=PROG,
        usage="\n       ".join(usage),
        description=(
            "Record what an NVIDIA Warp program does and find its gradient bugs.\n\n"
            "Running a program (the default): SCRIPT.py runs exactly as `python SCRIPT.py ARGS`\n"
            "would (same sys.argv, __main__, sys.path[0], working directory, output, tracebacks\n"
            "and exit status). Everything after SCRIPT.py or -m MODULE belongs to the program.\n"
            "The trace is written to SCRIPT.wtrace in the current directory; a summary and the\n"
            "findings are printed to stderr."
        ),
        epilog=f"commands (`{PROG} COMMAND --help` for each):\n{commands}\n\n{_exit_section(statuses)}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.prepare_parser(parser)
    parser.siblings = tuple(other.name for other, _ in others)
    for other, other_parser in others:
        for name in sorted(other_parser.option_names - {"-h", "--help"}):
            parser.elsewhere.setdefault(name, []).append(other.name)
    return parser


def _usage_line(parser: CommandParser) -> str:
    usage = parser.format_usage().strip()
    return "%(prog)s" + usage.removeprefix("usage: ").removeprefix(PROG)


def _exit_section(statuses: list[tuple[str, str]]) -> str:
    rows = [*statuses, ("any", INTERNAL_ERROR_NOTE)]
    width = max(len(name) for name, _ in rows) + 2
    return "exit status:\n" + "\n".join(f"  {name:<{width}}{line}" for name, line in rows)


def _sentence(help: str) -> str:
    return help[:1].upper() + help[1:] + "."


def _error(message: str) -> None:
    one_line = " ".join(part.strip() for part in message.splitlines() if part.strip())
    flush_stdout()
    write_stderr(f"warptrace: error: {one_line}")
