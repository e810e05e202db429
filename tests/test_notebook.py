"""``%load_ext warptrace`` and ``%%warptrace`` in IPython's InteractiveShell (no browser, no kernel)."""

from __future__ import annotations

import html
import re

import pytest

from tests.recorded import ROOT, recorder_missing

PROGRAM = ROOT / "tests" / "programs" / "wt101_force_reuse.py"


@pytest.fixture
def shell():
    pytest.importorskip("IPython", reason="IPython is in the test extra")
    missing = recorder_missing()
    if missing:
        pytest.skip(missing)
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    assert shell.run_cell("%load_ext warptrace").success
    source = PROGRAM.read_text().replace('if __name__ == "__main__":\n    run()\n', "")
    assert shell.run_cell(source).success
    yield shell
    InteractiveShell.clear_instance()


def _capture(shell, cell):
    from IPython.utils.capture import capture_output

    with capture_output() as captured:
        result = shell.run_cell(cell)
    return result, captured


def test_cell_magic_shows_the_html_report_inline(shell, tmp_path):
    trace = tmp_path / "cell.wtrace"
    result, captured = _capture(shell, f"%%warptrace -o {trace}\nout = run()\nout['grad'].shape")
    assert result.success
    (output,) = captured.outputs
    page = output.data["text/html"]
    assert page.startswith('<iframe class="warptrace-report" sandbox="allow-scripts"')
    document = html.unescape(re.search(r'srcdoc="([^"]*)"', page).group(1))
    assert document.startswith("<!DOCTYPE html>") and "WT101" in document
    report = shell.user_ns["_warptrace_report"]
    assert [f.code for f in report.findings] == ["WT101"]
    assert shell.user_ns["out"]["grad"].shape == (4,)  # the cell ran as usual
    assert (trace / "meta.json").is_file()


def test_cell_magic_text_report_and_warp_restored(shell):
    import warp as wp

    launch = wp.launch
    result, captured = _capture(shell, "%%warptrace --text\nrun()")
    assert result.success
    assert "error WT101 overwrite-after-read" in captured.stdout
    assert wp.launch is launch  # the recorder is removed after the cell


def test_bad_magic_line_is_one_line(shell):
    _, captured = _capture(shell, "%%warptrace --bogus\nrun()")
    assert captured.stdout.startswith("warptrace: usage: %%warptrace")
