"""pytest plugin: record tests with warptrace and fail those whose trace has gradient bugs.

Registered through the ``pytest11`` entry point and off unless asked:

- ``pytest --warptrace`` records every test's call phase to its own trace and fails a
  test whose trace has a finding at or above ``--warptrace-fail-on`` (default ``error``;
  ini option ``warptrace_fail_on``), printing the findings in the failure;
- ``@pytest.mark.warptrace(fail_on="warning")`` does the same for one test
  (``fail_on=None`` records and reports without failing);
- the ``warptrace`` fixture records the test it is requested by and hands the test the
  recording: ``warptrace.report()`` stops it and returns the analysis, for tests that
  assert on findings themselves (set ``warptrace.fail_on = None`` to never fail).

Traces go to ``--warptrace-dir`` (default: ``warptrace`` under pytest's temporary
folder), one ``<test name>.wtrace`` per test. Importing this module imports neither
Warp nor the recorder: a run without the option pays nothing.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Generator

    from warptrace.analysis.report import Report

SEVERITIES = ("error", "warning", "info")
_KEY = pytest.StashKey["Recording"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("warptrace", "record tests with warptrace and fail on gradient bugs")
    group.addoption(
        "--warptrace",
        action="store_true",
        default=False,
        help="record each test with warptrace; fail tests whose trace has findings (see --warptrace-fail-on)",
    )
    group.addoption(
        "--warptrace-fail-on",
        choices=SEVERITIES,
        default=None,
        help="fail a recorded test on findings of this severity or worse (default: error)",
    )
    group.addoption(
        "--warptrace-dir",
        default=None,
        metavar="DIR",
        help="write the tests' traces here (default: pytest's tmp)",
    )
    parser.addini("warptrace_fail_on", "default of --warptrace-fail-on", default="error")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        'warptrace(fail_on="error"): record this test with warptrace and fail it on findings at or above fail_on',
    )


class Recording:
    """One test's recording: where its trace goes and at which severity it fails."""

    def __init__(self, path: Path, fail_on: str | None, name: str) -> None:
        if fail_on is not None and fail_on not in SEVERITIES:
            raise pytest.UsageError(f"warptrace: fail_on must be one of {', '.join(SEVERITIES)} or None")
        self.path = path
        self.fail_on = fail_on
        self.name = name
        self._report: Report | None = None
        self._started = False

    def start(self) -> None:
        from warptrace.record import recorder

        if recorder.active() is not None:  # the whole session is already recorded (python -m warptrace)
            return
        recorder.start(str(self.path), argv=[self.name], script=self.name)
        self._started = True

    def report(self) -> Report:
        """Stop recording (if still running) and return the analysis of the trace."""
        if self._report is None:
            from warptrace.analysis.report import analyze_trace
            from warptrace.record import recorder
            from warptrace.trace.reader import read_trace

            if self._started:
                recorder.stop()
                self._started = False
            self._report = analyze_trace(read_trace(str(self.path)))
        return self._report

    def failing_text(self) -> str | None:
        """The findings that fail the test, as the text report, or None when it passes."""
        if self.fail_on is None:
            return None
        from warptrace.analysis.findings import Severity
        from warptrace.report.text import render

        report = self.report()
        if not report.exit_code(Severity.parse(self.fail_on)):
            return None
        return render(report) + f"trace: {self.path}\n"


def _trace_dir(config: pytest.Config) -> Path:
    option = config.getoption("--warptrace-dir")
    if option:
        folder = Path(option)
    else:
        factory = getattr(config, "_tmp_path_factory", None)
        base = factory.getbasetemp() if factory is not None else Path(tempfile.mkdtemp(prefix="pytest-"))
        folder = base / "warptrace"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _recording(item: pytest.Item, forced: bool = False) -> Recording | None:
    existing = item.stash.get(_KEY, None)
    if existing is not None:
        return existing
    config = item.config
    marker = item.get_closest_marker("warptrace")
    if not (forced or marker is not None or config.getoption("--warptrace")):
        return None
    fail_on: str | None = config.getoption("--warptrace-fail-on") or config.getini("warptrace_fail_on")
    if marker is not None:
        fail_on = marker.kwargs.get("fail_on", marker.args[0] if marker.args else fail_on)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid).strip("_")[:150] or "test"
    recording = Recording(_trace_dir(config) / f"{name}.wtrace", fail_on, item.nodeid)
    item.stash[_KEY] = recording
    return recording


@pytest.fixture
def warptrace(request: pytest.FixtureRequest) -> Recording:
    """Record this test with warptrace; ``warptrace.report()`` stops recording and returns the findings."""
    recording = _recording(request.node, forced=True)
    assert recording is not None
    return recording


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, None]:
    recording = _recording(item)
    if recording is None:
        yield
        return
    recording.start()
    outcome = yield
    try:
        text = recording.failing_text()
    finally:
        from warptrace.record import recorder

        if recording._started:
            recorder.stop()
    if text is None:
        return
    if outcome.excinfo is not None:  # the test failed on its own: add the findings to its report
        item.add_report_section("call", "warptrace", text)
        return
    outcome.force_exception(
        pytest.fail.Exception(
            f"warptrace found gradient bugs (fail_on={recording.fail_on}):\n{text}", pytrace=False
        )
    )
