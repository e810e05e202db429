"""File size and load time of the reports of a large trace (HTML, Perfetto, SARIF).

    python tools/bench_report.py [--launches 1M] [--keep DIR] [--chromium /usr/bin/chromium]

Generates a synthetic training-run trace (``tools/synth_trace.py``), analyzes it, writes
the HTML report and measures, in headless Chromium driven by Playwright, the time from
navigation until the page has drawn itself (``body[data-ready]``) and the number of DOM
elements; then times the Perfetto export and the SARIF report. A benchmark, not a test:
figures go to docs/performance.md, nothing asserts a wall time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from synth_trace import generate, parse_size

from warptrace.analysis.report import analyze_trace
from warptrace.report import html, perfetto, sarif
from warptrace.trace.reader import read_trace


def _browser_load(path: Path, chromium: str, runs: int) -> tuple[float, float, int]:
    from playwright.sync_api import sync_playwright

    times, ready = [], []
    nodes = 0
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for _ in range(runs):
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            start = time.perf_counter()
            page.goto(path.as_uri())
            page.wait_for_selector("body[data-ready]", state="attached", timeout=120_000)
            times.append(time.perf_counter() - start)
            ready.append(page.evaluate("performance.now()") / 1000)
            nodes = page.evaluate("document.getElementsByTagName('*').length")
            page.close()
        browser.close()
    return min(times), min(ready), nodes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", default="1M")
    parser.add_argument("--keep", metavar="DIR", help="keep the trace and the reports here")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--runs", type=int, default=3, help="browser loads (the best is reported)")
    args = parser.parse_args(argv)
    folder = Path(args.keep or tempfile.mkdtemp(prefix="bench-report-"))
    folder.mkdir(parents=True, exist_ok=True)
    trace_path = folder / "run.wtrace"

    start = time.perf_counter()
    info = generate(trace_path, parse_size(args.launches))
    print(f"trace: {info.launches:,} launches, {info.events:,} events, {info.accesses:,} accesses "
          f"({time.perf_counter() - start:.1f} s to generate)", flush=True)  # fmt: skip
    start = time.perf_counter()
    report = analyze_trace(read_trace(trace_path))
    print(f"analysis: {time.perf_counter() - start:.1f} s, {len(report.findings)} findings", flush=True)

    start = time.perf_counter()
    page = html.render(report)
    html_path = folder / "report.html"
    html_path.write_text(page, encoding="utf-8")
    print(
        f"html: {len(page.encode()) / 1024:.0f} KiB written in {time.perf_counter() - start:.2f} s",
        flush=True,
    )
    if Path(args.chromium).exists():
        wall, ready, nodes = _browser_load(html_path, args.chromium, args.runs)
        print(f"html in Chromium: drawn {ready * 1000:.0f} ms after navigation start "
              f"({wall * 1000:.0f} ms wall incl. the driver), {nodes:,} DOM elements", flush=True)  # fmt: skip
    else:
        print(f"html in Chromium: skipped ({args.chromium} missing)")

    start = time.perf_counter()
    perfetto_path = folder / "run.perfetto.json"
    with open(perfetto_path, "w", encoding="utf-8") as out:
        count = perfetto.write(report.model, report.findings, out)
    print(f"perfetto: {count:,} trace events, {perfetto_path.stat().st_size / 2**20:.0f} MiB "
          f"in {time.perf_counter() - start:.1f} s", flush=True)  # fmt: skip
    start = time.perf_counter()
    document = sarif.render(report)
    print(f"sarif: {len(document) / 1024:.0f} KiB in {time.perf_counter() - start:.2f} s")
    if not args.keep:
        print(f"(files in {folder}; pass --keep DIR to choose where)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
