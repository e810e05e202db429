"""The text and JSON reports of a few zoo programs, compared with gold files in tests/gold.

Regenerate on purpose after a deliberate change of wording, format or program::

    WARPTRACE_REGEN_GOLD=1 python -m pytest tests/test_report_gold.py

The programs run with the repository root as working directory, so report paths are
``tests/programs/...``; what still depends on the machine or on recorder internals is
normalized: the trace path (``<tmp>``), the repository root (``<root>``), the Warp and
warptrace versions, event sequence numbers and array/allocation ids in the evidence.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.zoo import discover, load

ROOT = Path(__file__).resolve().parent.parent
GOLD = Path(__file__).parent / "gold"
REGEN = os.environ.get("WARPTRACE_REGEN_GOLD") == "1"

# a repeated overwrite, a post-loss launch that also overwrites, and a clean twin
CASES = ("wt101_force_reuse", "wt105_reset", "wt101_force_reuse_fixed")
_VOLATILE_COUNTS = ("events", "arrays")


def _recorder_missing() -> str | None:
    try:
        import warp  # noqa: F401

        from warptrace.record import recorder  # noqa: F401
    except ImportError as exc:
        return f"recording needs warp and warptrace.record ({exc})"
    return None


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """name -> (Report, trace dir), recorded once per module."""
    missing = _recorder_missing()
    if missing:
        pytest.skip(missing)
    import warptrace

    programs = {p.name: p for p in discover()}
    cache: dict[str, Any] = {}
    old_cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        for name in CASES:
            module = load(programs[name], module_name="zoo_gold_" + name)
            trace_path = tmp_path_factory.mktemp(name) / "run.wtrace"
            warptrace.start(trace_path)
            try:
                module.run()
            finally:
                warptrace.stop()
            cache[name] = (warptrace.analyze(trace_path), str(trace_path))
    finally:
        os.chdir(old_cwd)
    return cache


def normalize_text(text: str, trace_path: str) -> str:
    text = text.replace(trace_path, "<tmp>/run.wtrace").replace(str(ROOT), "<root>")
    return re.sub(r"\(Warp [^)]*\)", "(Warp <version>)", text)


def normalize_json(text: str, trace_path: str) -> str:
    data = json.loads(text.replace(trace_path, "<tmp>/run.wtrace").replace(str(ROOT), "<root>"))
    data["warptrace_version"] = "<version>"
    data["warp_version"] = "<version>"
    for key in _VOLATILE_COUNTS:
        if key in data["counts"]:
            data["counts"][key] = "#"
    for finding in data["findings"]:
        finding["evidence"] = _hide_numbers(finding["evidence"])
    return json.dumps(data, indent=2) + "\n"


def _hide_numbers(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return "#"
    if isinstance(value, list):
        return [_hide_numbers(v) for v in value]
    if isinstance(value, dict):
        return {k: _hide_numbers(v) for k, v in value.items()}
    return value


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize("name", CASES)
def test_report_matches_gold(reports, name, fmt):
    from warptrace.report import render

    report, trace_path = reports[name]
    rendered = render(report, fmt)
    if fmt == "json":
        rendered = normalize_json(rendered, trace_path)
        gold = GOLD / f"{name}.json"
    else:
        rendered = normalize_text(rendered, trace_path)
        gold = GOLD / f"{name}.txt"
    if REGEN:
        GOLD.mkdir(exist_ok=True)
        gold.write_text(rendered)
        return
    assert gold.is_file(), f"{gold} is missing: run with WARPTRACE_REGEN_GOLD=1 to create it"
    assert rendered == gold.read_text(), (
        f"{name} {fmt} report differs from {gold} (WARPTRACE_REGEN_GOLD=1 to accept)"
    )
