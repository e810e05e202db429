"""The CLI's commands, one class each (see :mod:`warptrace.commands.base`).

Adding a command is one class in its own module and one entry in :data:`COMMANDS`;
its help, usage line and exit statuses then appear in ``--help`` by themselves.
"""

from __future__ import annotations

from warptrace.commands.analyze import AnalyzeCommand
from warptrace.commands.base import Command
from warptrace.commands.bisect import BisectCommand
from warptrace.commands.diff import DiffCommand
from warptrace.commands.explain import ExplainCommand
from warptrace.commands.export import ExportCommand
from warptrace.commands.gradcheck import GradcheckCommand
from warptrace.commands.run import RunCommand
from warptrace.commands.show import ShowCommand

DEFAULT_COMMAND: type[Command] = RunCommand  # when the first word names no command
COMMANDS: tuple[type[Command], ...] = (
    AnalyzeCommand,
    ShowCommand,
    ExportCommand,
    GradcheckCommand,
    BisectCommand,
    DiffCommand,
    ExplainCommand,
)

__all__ = ["COMMANDS", "DEFAULT_COMMAND", "Command"]
