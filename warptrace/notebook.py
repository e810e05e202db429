"""IPython / Jupyter: ``%load_ext warptrace``, then a ``%%warptrace`` cell records the cell
and shows the HTML report inline.

::

    %%warptrace                     # trace to a temporary folder
    %%warptrace -o step.wtrace      # keep the trace
    %%warptrace --text              # the text report instead of the HTML one

The cell runs as usual (its output and its result are the cell's own). The report is
shown in an ``<iframe srcdoc>``, so its script and styles cannot touch the notebook and
it needs no network; the trace stays on disk for ``warptrace analyze`` or ``export``.
The report is also kept as ``_warptrace_report`` in the user namespace.
"""

from __future__ import annotations

import argparse
import html
import shlex
import tempfile
from typing import Any

from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.display import display

IFRAME_HEIGHT = 720


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(WarptraceMagics)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="%%warptrace", add_help=False, exit_on_error=False)
    parser.add_argument("-o", "--output", default=None)
    parser.add_argument("--text", action="store_true")
    return parser


@magics_class
class WarptraceMagics(Magics):
    @cell_magic
    def warptrace(self, line: str, cell: str) -> None:
        """Record the cell with warptrace and show the report: ``%%warptrace [-o TRACE] [--text]``."""
        try:
            options = _parser().parse_args(shlex.split(line))
        except (argparse.ArgumentError, SystemExit, ValueError) as exc:
            print(f"warptrace: usage: %%warptrace [-o TRACE] [--text] ({exc})")
            return
        shell = self.shell
        assert shell is not None  # a magic always runs inside a shell
        from warptrace.analysis.report import analyze_trace
        from warptrace.record import recorder
        from warptrace.trace.reader import read_trace

        path = options.output or tempfile.mkdtemp(prefix="warptrace-cell-") + "/cell.wtrace"
        if recorder.active() is not None:
            print("warptrace: a recording is already running; the cell runs untraced")
            shell.run_cell(cell)
            return
        recorder.start(path, argv=["%%warptrace"], script="<cell>")
        try:
            result = shell.run_cell(cell)
        finally:
            recorder.stop()
        error = result.error_before_exec or result.error_in_exec
        report = analyze_trace(read_trace(path))
        shell.user_ns["_warptrace_report"] = report
        if options.text:
            from warptrace.report.text import render as render_text

            print(render_text(report), end="")
        else:
            display({"text/html": inline_html(report)}, raw=True)
        if error is not None:
            print(f"warptrace: the cell raised {type(error).__name__}; the report covers what ran before")


def inline_html(report: Any) -> str:
    """The HTML report inside an isolated iframe (its own document, scripts allowed, nothing else)."""
    from warptrace.report.html import render

    document = html.escape(render(report), quote=True)
    return (
        f'<iframe class="warptrace-report" sandbox="allow-scripts" style="width:100%;height:{IFRAME_HEIGHT}px;'
        f'border:1px solid #ddd" srcdoc="{document}"></iframe>'
    )
