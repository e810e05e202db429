"""One-line activation for scripts whose launch command cannot change::

    import warptrace.auto  # first import of the script, before Warp's

records the whole run to ``<script>.wtrace`` in the current directory and, when the
interpreter exits, prints the summary and the findings to stderr exactly as
``python -m warptrace script.py`` would. Importing plain ``warptrace`` still patches
nothing; only this module starts the recorder, at import.

The exit status stored in the trace comes from ``sys.exit(code)`` or an uncaught
exception (1); a run that ends otherwise is recorded as status 0. The script's own exit
status is never changed. Under ``python -m warptrace`` (a recording already running)
this import does nothing.
"""

from __future__ import annotations

import atexit
import os
import sys
from types import TracebackType
from typing import Any, NoReturn

_outcome: dict[str, Any] = {"exit_status": None, "error": None}


def trace_name() -> str:
    """``<script stem>.wtrace`` (``python.wtrace`` for ``python -c`` or an interactive session)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None) or (sys.argv[0] if sys.argv else "")
    stem = os.path.splitext(os.path.basename(path))[0] if path and path != "-c" else ""
    return f"{stem or 'python'}.wtrace"


def _install() -> None:
    from warptrace.commands.base import write_stderr
    from warptrace.commands.run import check_output, import_recorder
    from warptrace.errors import WarptraceError

    recorder = import_recorder()
    if recorder.active() is not None:
        return  # python -m warptrace (or warptrace.start()) already records this run
    output = trace_name()
    try:
        check_output(output)
        trace_file = os.path.abspath(output)
        recorder.start(trace_file, argv=list(sys.argv), script=sys.argv[0] if sys.argv else "")
    except (WarptraceError, OSError) as exc:
        write_stderr(f"warptrace: not recording: {exc}")
        return

    previous_hook = sys.excepthook
    previous_exit = sys.exit

    def excepthook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        _outcome["exit_status"], _outcome["error"] = 1, f"{kind.__name__}: {value}"
        previous_hook(kind, value, tb)

    def exit_hook(status: Any = None) -> NoReturn:
        # Python's rule (as warptrace.runner applies it): None is 0, an int (a bool too) is itself
        _outcome["exit_status"] = 0 if status is None else int(status) if isinstance(status, int) else 1
        previous_exit(status)
        raise SystemExit(status)  # unreachable unless the original was replaced by something odd

    sys.excepthook = excepthook
    sys.exit = exit_hook

    def finish() -> None:
        from warptrace.commands.run import finish_run

        sys.excepthook, sys.exit = previous_hook, previous_exit
        status = _outcome["exit_status"]
        recorder.stop(exit_status=0 if status is None else status, error=_outcome["error"])
        finish_run(recorder, trace_file, output, quiet=False, analyze=True)

    # Registered after recorder.start() registered its own exit hook: atexit runs the last
    # registered first, so this stops the recorder (which unregisters that hook) and reports.
    atexit.register(finish)


_install()
