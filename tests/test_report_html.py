"""The HTML report's data and document, without a browser (tests/test_report_browser.py drives Chromium)."""

from __future__ import annotations

import json
import re

import pytest

from tests.recorded import ROOT, record

PROGRAM = ROOT / "tests" / "programs" / "wt101_force_reuse.py"


@pytest.fixture(scope="module")
def buggy(tmp_path_factory):
    return record("wt101_force_reuse", tmp_path_factory.mktemp("html"))


@pytest.fixture(scope="module")
def fixed(tmp_path_factory):
    return record("wt101_force_reuse_fixed", tmp_path_factory.mktemp("html_fixed"))


def _data(document: str) -> dict:
    match = re.search(r'<script type="application/json" id="wt-data">(.*?)</script>', document, re.S)
    assert match, "the report data block is missing"
    return json.loads(match.group(1))


def _line(text: str) -> int:
    for number, line in enumerate(PROGRAM.read_text().splitlines(), start=1):
        if text in line:
            return number
    raise AssertionError(text)


def test_document_is_self_contained(buggy):
    from warptrace.report import html

    document = html.render(buggy[0])
    assert document.startswith("<!DOCTYPE html>")
    assert "default-src 'none'" in document  # the CSP forbids every fetch
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", document)
    assert "{{" not in document and "/*{{" not in document  # every placeholder filled


def test_finding_source_marks_every_role(buggy):
    from warptrace.report import html

    data = _data(html.render(buggy[0]))
    (finding,) = data["findings"]
    assert finding["code"] == "WT101"
    assert finding["help_url"].endswith("/rules/WT101/")  # a link to the rule's page, not a fetch
    marks = {int(line): roles for window in finding["source"] for line, roles in window["marks"].items()}
    overwrite = _line("# expect: WT101")
    assert marks == {
        overwrite: ["overwrite"],
        overwrite + 1: ["read"],
        _line("force = wp.zeros"): ["allocation"],
        _line("tape.backward(loss)"): ["backward"],
    }
    window = finding["source"][0]
    assert window["file"] == "tests/programs/wt101_force_reuse.py"
    shown = dict(zip(range(window["start"], window["start"] + len(window["lines"])), window["lines"]))
    assert "# expect: WT101" in shown[overwrite]


def test_hazard_picture_marks_the_overwrite_after_the_read(buggy):
    from warptrace.report import html

    hazard = _data(html.render(buggy[0]))["findings"][0]["hazard"]
    assert hazard["lanes"][0] == "force" and hazard["hazard_lanes"] == [0]
    events = [c for c in hazard["columns"] if c["kind"] == "event"]
    read = next(c for c in events if c.get("hazard") == "read")
    overwrite = next(c for c in events if c.get("hazard") == "overwrite")
    assert (read["name"], overwrite["name"]) == ("integrate", "spring_force")
    assert read["seq"] < overwrite["seq"]
    assert [0, "r"] in read["marks"] and [0, "w"] in overwrite["marks"]
    assert hazard["backward"]["line"] == _line("tape.backward(loss)")


def test_timeline_and_arrays(buggy):
    from warptrace.report import html

    data = _data(html.render(buggy[0]))
    timeline = data["timeline"]
    assert timeline["rows"] == ["tape 0", "untaped"]
    assert [mark[0] for mark in timeline["marks"]] == ["backward"]
    tape_cells = timeline["cells"][0]
    assert sum(cell[1] for cell in tape_cells) == 9 and sum(cell[2] for cell in tape_cells) > 0
    labels = {row[0]: row for row in data["arrays"]["rows"]}
    assert (
        labels["force"][4] is True
        and labels["force"][5] == f"tests/programs/wt101_force_reuse.py:{_line('force = wp.zeros')}"
    )


def test_clean_twin_says_what_was_checked(fixed):
    from warptrace.report import html

    data = _data(html.render(fixed[0]))
    assert data["findings"] == [] and data["summary"] == "no findings"
    assert data["families_checked"]


def test_script_text_cannot_close_the_data_block(buggy):
    from warptrace.report import html

    report = buggy[0]
    report.findings[0].message += " </script><script>alert(1)</script> <!--"
    try:
        document = html.render(report)
    finally:
        report.findings[0].message = report.findings[0].message.split(" </script>")[0]
    assert document.count("</script>") == 2  # the data block and the code block
    assert "alert(1)" in _data(document)["findings"][0]["message"]


def test_repeated_steps_fold_on_a_long_tape(tmp_path):
    """A 2,000-step tape is drawn as a few dozen columns, the hazard pair kept unfolded."""
    from tests.tracebuilder import TraceBuilder
    from warptrace.analysis.report import analyze_trace
    from warptrace.report import views
    from warptrace.trace.reader import read_trace

    tb = TraceBuilder()
    force = tb.array("force", requires_grad=True)
    states = [tb.array(f"s{i}", requires_grad=True) for i in range(3)]
    loss = tb.array("loss", shape=(1,), requires_grad=True)
    compute = tb.kernel("compute", x="r", f="w")
    step = tb.kernel("step", x="r", f="r", y="w")
    total = tb.kernel("total", x="r", loss="a")
    tape = tb.tape()
    with tb.recording(tape):
        for i in range(2000):
            tb.launch(compute, x=states[i % 2], f=force, line=10)
            tb.launch(step, x=states[i % 2], f=force, y=states[(i + 1) % 2], line=11)
        tb.launch(total, x=states[0], loss=loss, line=12)
    tb.backward(tape, loss, line=13)
    path = tb.write(tmp_path / "long.wtrace")
    report = analyze_trace(read_trace(path))
    finding = next(f for f in report.findings if f.code == "WT101" and "force" in f.message)
    hazard = views.hazard_view(report.model, finding)
    assert hazard is not None
    assert hazard["launches"] == 4001 and hazard["period"] == 2
    assert len(hazard["columns"]) <= views.MAX_COLUMNS
    folds = [c for c in hazard["columns"] if c["kind"] == "fold"]
    assert (
        folds
        and sum(c["count"] for c in folds) + sum(c["kind"] == "event" for c in hazard["columns"]) == 4001
    )
    assert any(c["steps"] > 1000 for c in folds)
    assert {c.get("hazard") for c in hazard["columns"]} >= {"read", "overwrite"}


def test_in_kernel_overwrite_picture_has_its_backward(tmp_path):
    from warptrace.report import html

    report, _ = record("wt102_clamp_inplace", tmp_path)
    (finding,) = [f for f in _data(html.render(report))["findings"] if f["code"] == "WT102"]
    hazard = finding["hazard"]
    program = (ROOT / "tests" / "programs" / "wt102_clamp_inplace.py").read_text().splitlines()
    backward_line = next(n for n, line in enumerate(program, start=1) if "tape.backward(loss)" in line)
    assert hazard["backward"]["line"] == backward_line
    (inplace,) = [c for c in hazard["columns"] if c.get("hazard")]
    assert inplace["hazard"] == "read+overwrite" and inplace["name"] == "limit_speed"
