"""A progress line for long work (analysis, export), shown only where a person watches.

Work that ends within about two seconds prints nothing. After that, one line on stderr
is rewritten in place (``\\r``) with the stage and the elapsed time, and erased when the
work ends. Nothing is printed when stderr is not a terminal (pipes, files) or in CI
(``CI`` set), where a rewritten line would only litter the log.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from types import TracebackType
from typing import TextIO

DELAY_S = 2.0  # show nothing for work shorter than this
INTERVAL_S = 0.25  # redraw at most this often


def wanted(stream: TextIO | None) -> bool:
    """True when ``stream`` is a terminal a person watches (not a pipe, not CI, not a dumb terminal)."""
    if stream is None or os.environ.get("CI") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


class Progress:
    """``with Progress("analyzing run.wtrace") as progress: progress.update("memory rules")``.

    A daemon thread draws the line, so a single long stage still shows its elapsed time;
    ``update`` only records the stage and the fraction done."""

    def __init__(self, what: str, stream: TextIO | None = None, *, delay: float = DELAY_S) -> None:
        self.what = what
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = wanted(self.stream)
        self.delay = delay
        self.start = time.monotonic()
        self.stage = ""
        self.done: int | None = None
        self.total: int | None = None
        self._width = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self.enabled:
            self._thread = threading.Thread(target=self._run, name="warptrace-progress", daemon=True)
            self._thread.start()

    def update(self, stage: str | None = None, done: int | None = None, total: int | None = None) -> None:
        if stage is not None:
            self.stage = stage
        self.done, self.total = done, total

    def line(self) -> str:
        text = f"warptrace: {self.what}"
        if self.stage:
            text += f": {self.stage}"
        if self.done is not None and self.total:
            text += f" {100 * self.done // self.total}%"
        return text + f" ({time.monotonic() - self.start:.0f} s)"

    def _run(self) -> None:
        if self._stop.wait(self.delay):
            return
        while not self._stop.is_set():
            text = self.line()
            self._write("\r" + text.ljust(self._width))
            self._width = len(text)
            self._stop.wait(INTERVAL_S)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._width:
            self._write("\r" + " " * self._width + "\r")
            self._width = 0

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            self._stop.set()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
