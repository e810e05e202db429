"""The command line a trace was recorded from, as the commands a report suggests repeat it
(``python -m warptrace gradcheck [--at N] SCRIPT.py ARGS``), with paths shown relative to the
run's folder."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["display_path", "gradcheck_command", "recorded_command"]


def display_path(path: str, cwd: str | None) -> str:
    """``path`` relative to ``cwd`` when it lies inside it, else unchanged."""
    if not path or not cwd or not os.path.isabs(path):
        return path
    base = os.path.normpath(cwd)
    full = os.path.normpath(path)
    if not full.startswith(base.rstrip(os.sep) + os.sep):
        return path
    return os.path.relpath(full, base)


def recorded_command(meta: dict[str, Any]) -> str:
    """``SCRIPT.py ARGS`` of a run of ``python -m warptrace SCRIPT.py`` (which stores ``script``);
    "SCRIPT.py" for a run started otherwise (``warptrace.start()`` in a program or a test)."""
    argv = [str(arg) for arg in meta.get("argv") or []] if meta.get("script") else []
    command = " ".join(display_path(arg, meta.get("cwd")) if i == 0 else arg for i, arg in enumerate(argv))
    return command or "SCRIPT.py"


def gradcheck_command(meta: dict[str, Any], at: int | None = None) -> str:
    """The ``gradcheck`` command that measures the recorded program's gradient (at its
    ``at``-th gradient read, counted from 1, when given)."""
    option = f"--at {at} " if at is not None else ""
    return f"python -m warptrace gradcheck {option}{recorded_command(meta)}"
