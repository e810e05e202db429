"""The pytest plugin, run with pytester in a subprocess (the recorder patches Warp process-wide).

The subprocess loads the plugin through its ``pytest11`` entry point, as a user's pytest would."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.recorded import ROOT

pytest_plugins = ["pytester"]

TESTS = f'''
import importlib.util
import pytest

def _run(name):
    spec = importlib.util.spec_from_file_location("prog_" + name, r"{ROOT / "tests" / "programs"}/" + name + ".py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.run()

def test_buggy():
    _run("wt101_force_reuse")

def test_fixed():
    _run("wt101_force_reuse_fixed")

@pytest.mark.warptrace(fail_on=None)
def test_marked_report_only():
    _run("wt101_force_reuse")

@pytest.mark.warptrace(fail_on="error")
def test_marked_failing():
    _run("wt101_force_reuse")

def test_fixture(warptrace):
    _run("wt101_force_reuse")
    report = warptrace.report()
    assert [f.code for f in report.findings] == ["WT101"]
    warptrace.fail_on = None  # asserted above: do not fail the test for it
'''


@pytest.fixture
def suite(pytester):
    # find_spec, not an import: pytester restores sys.modules after each test, and Warp's
    # native library cannot be loaded twice into one process
    if importlib.util.find_spec("warp") is None:
        pytest.skip("recording needs warp")
    pytester.makepyfile(test_sim=TESTS)
    return pytester


def test_off_unless_asked(suite):
    result = suite.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, failed=1)  # only the marked test asks to fail
    result.stdout.fnmatch_lines(["*test_marked_failing*", "*warptrace found gradient bugs (fail_on=error)*"])
    assert "test_buggy FAILED" not in result.stdout.str()


def test_option_records_every_test_and_prints_findings(suite, tmp_path):
    traces = tmp_path / "traces"
    result = suite.runpytest_subprocess(
        "-p", "no:cacheprovider", "-v", "--warptrace", f"--warptrace-dir={traces}"
    )
    result.assert_outcomes(passed=3, failed=2)
    output = result.stdout.str()
    assert "test_sim.py::test_buggy FAILED" in output and "test_sim.py::test_fixed PASSED" in output
    assert (
        "test_sim.py::test_marked_report_only PASSED" in output
        and "test_sim.py::test_fixture PASSED" in output
    )
    result.stdout.fnmatch_lines(["*error WT101 overwrite-after-read*", "*wt101_force_reuse.py:69*"])
    assert (traces / "test_sim.py_test_buggy.wtrace" / "meta.json").is_file()


def test_fail_on_level_from_the_command_line(suite):
    result = suite.runpytest_subprocess(
        "-p", "no:cacheprovider", "--warptrace", "--warptrace-fail-on=info", "-k", "fixed"
    )
    result.assert_outcomes(passed=1)  # the fixed twin has no finding at any level


def test_plugin_import_is_cheap():
    """pytest imports the plugin in every session of anyone who installed warptrace."""
    code = (
        "import sys, warptrace.pytest_plugin\n"
        "heavy = [m for m in ('warp', 'numpy', 'pyarrow', 'IPython') if m in sys.modules]\n"
        "print(heavy)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "[]", result.stderr
