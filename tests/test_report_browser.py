"""The HTML report in a real browser: the system Chromium (/usr/bin/chromium, installed by
.ci/run) driven by Playwright. Nothing here downloads a browser."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.recorded import ROOT, record

CHROMIUM = Path(os.environ.get("WARPTRACE_CHROMIUM", "/usr/bin/chromium"))
PROGRAM = ROOT / "tests" / "programs" / "wt101_force_reuse.py"


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium; .ci/run installs it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def report_file(tmp_path_factory):
    from warptrace.report import render

    folder = tmp_path_factory.mktemp("browser")
    report, _ = record("wt101_force_reuse", folder)
    path = folder / "report.html"
    path.write_text(render(report, "html"), encoding="utf-8")
    return path


@pytest.fixture
def page(browser, report_file):
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    errors: list[str] = []
    requests: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("request", lambda request: requests.append(request.url))
    page.goto(report_file.as_uri())
    page.wait_for_selector("body[data-ready]", state="attached", timeout=15000)
    yield page
    assert errors == [], f"script errors: {errors}"
    assert requests == [report_file.as_uri()], f"the report fetched something: {requests}"
    page.close()


def _line(text: str) -> int:
    return next(n for n, line in enumerate(PROGRAM.read_text().splitlines(), start=1) if text in line)


def test_finding_source_and_hazard_in_the_dom(page, tmp_path):
    card = page.locator("article.finding[data-code=WT101]")
    assert card.count() == 1 and card.is_visible()
    assert "overwrite-after-read" in card.locator("h3").inner_text()
    marked = {
        int(line.get_attribute("data-line")): line.get_attribute("data-roles")
        for line in card.locator(".src-line.marked").all()
    }
    overwrite = _line("# expect: WT101")
    assert marked == {
        overwrite: "overwrite",
        overwrite + 1: "read",
        _line("force = wp.zeros"): "allocation",
        _line("tape.backward(loss)"): "backward",
    }
    hazard = card.locator(".hz-overwrite")
    assert hazard.count() == 1
    fill = hazard.evaluate("node => getComputedStyle(node).fill")
    assert fill == "rgb(213, 0, 0)"  # the overwrite-after-read drawn in red
    assert card.locator(".hz-read").count() == 1 and card.locator(".hz-backward").count() == 1
    assert card.locator(".hz-arc").count() == 1
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    assert (tmp_path / "report.png").stat().st_size > 10_000


def test_filters_hide_and_show_findings(page, tmp_path):
    card = page.locator("article.finding[data-code=WT101]")
    assert page.locator("#shown").inner_text() == "1 of 1 finding shown"
    page.click("#filter-severity-error")
    assert card.is_hidden()
    assert page.locator("#shown").inner_text() == "0 of 1 finding shown"
    page.click("#filter-severity-error")
    page.click("#filter-rule-WT101")
    assert card.is_hidden()
    page.click("#filter-rule-WT101")
    assert card.is_visible()
    page.screenshot(path=str(tmp_path / "filtered.png"))


def test_timeline_and_array_table(page):
    assert page.locator("#timeline .tl-fwd").count() > 0
    assert page.locator("#timeline .tl-backward").count() == 1
    assert page.locator("#timeline .tl-finding").count() == 1
    labels = page.locator("table.arrays td:first-child").all_inner_texts()
    assert "force" in labels and "loss" in labels


def test_clean_twin_draws_without_errors(browser, tmp_path):
    from warptrace.report import render

    report, _ = record("wt101_force_reuse_fixed", tmp_path)
    path = tmp_path / "clean.html"
    path.write_text(render(report, "html"), encoding="utf-8")
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready]", state="attached", timeout=15000)
    assert errors == []
    assert page.locator("#verdict").inner_text().startswith("no gradient bugs found (checked: ")
    assert page.locator("article.finding").count() == 0
    assert "does not prove the gradient right" in page.locator("#summary").inner_text()
    page.close()


def test_health_chart_marks_where_a_divergence_began(browser, tmp_path):
    from warptrace.report import render

    report, _ = record("wt505_stiff_spring", tmp_path, numerics=True)
    path = tmp_path / "health.html"
    path.write_text(render(report, "html"), encoding="utf-8")
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready]", state="attached", timeout=15000)
    assert errors == []
    chart = page.locator("#health svg.health-svg")
    assert chart.count() == 1 and chart.is_visible()
    assert page.locator("#health .hl-loss").count() == 1
    assert page.locator("#health [data-role=growth]").count() == 1
    assert page.locator("#health [data-role=nonfinite]").count() == 1
    assert "grew from 0.205 at step 5" in page.locator("#health .caption").inner_text()
    page.close()


def test_no_health_section_without_value_summaries(page):
    assert page.locator("#health").is_hidden()
