"""The progress line: only on a terminal, only after the delay, erased at the end."""

from __future__ import annotations

import io
import time

from warptrace.progress import Progress, wanted


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_silent_in_pipes_and_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    assert not wanted(io.StringIO())
    assert wanted(_Terminal())
    monkeypatch.setenv("CI", "true")
    assert not wanted(_Terminal())


def test_line_drawn_after_the_delay_and_erased(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    stream = _Terminal()
    with Progress("analyzing run.wtrace", stream, delay=0.0) as progress:
        progress.update("memory rules", 1, 4)
        deadline = time.monotonic() + 5
        while "memory rules" not in stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.01)
    text = stream.getvalue()
    assert "warptrace: analyzing run.wtrace: memory rules 25%" in text
    assert text.endswith("\r")  # erased: the next output starts on a clean line


def test_short_work_prints_nothing(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    stream = _Terminal()
    with Progress("analyzing", stream, delay=60.0) as progress:
        progress.update("rules")
    assert stream.getvalue() == ""
