"""tools/check_warp_suite.py: unittest output parsed, module list, the validation page's tables."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[1] / "tools"


def _tool():
    """The tool as a module (it imports warp_suite_verdicts from its own folder)."""
    if "check_warp_suite" not in sys.modules:
        sys.path.insert(0, str(TOOLS))
        try:
            spec = importlib.util.spec_from_file_location("check_warp_suite", TOOLS / "check_warp_suite.py")
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules["check_warp_suite"] = module  # dataclasses look their module up
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(TOOLS))
    return sys.modules["check_warp_suite"]


OUTPUT = """test_a (warp.tests.m.T.test_a_cpu) ... ok
test_b (warp.tests.m.T.test_b_cpu)
First line of a docstring. ... skipped 'No CUDA devices found'
test_c (warp.tests.m.T.test_c_cpu) ... FAIL

======================================================================
FAIL: test_c_cpu (warp.tests.m.T.test_c_cpu)
----------------------------------------------------------------------
Ran 3 tests in 0.5s

FAILED (failures=1, skipped=1)
"""


def test_parse_counts_problems_and_skip_reasons():
    outcome = _tool().parse(OUTPUT)
    assert (outcome.status, outcome.tests, outcome.failures, outcome.skipped) == ("FAILED", 3, 1, 1)
    assert outcome.problems == {"warp.tests.m.T.test_c_cpu": "FAIL"}
    assert outcome.skip_reasons == {"No CUDA devices found": 1}


def test_every_module_of_warp_tests_is_found():
    modules = _tool().all_modules()
    assert "test_tape" in modules and "matrix.test_mat_lite" in modules and "aot.test_module_aot" in modules
    assert all(m.split(".")[-1].startswith("test_") for m in modules)


def test_the_page_gets_the_tables_between_its_markers(tmp_path):
    tool = _tool()
    outcome = vars(tool.parse(OUTPUT))
    finding = {
        "code": "WT405",
        "severity": "error",
        "file": "/x/warp/tests/deterministic/test_deterministic_counter.py",
        "line": 113,
        "function": "counter_kernel",
        "text": "slot = wp.atomic_add(counter, 0, 1)",
    }
    entry = {
        "plain": outcome,
        "traced": outcome,
        "same": True,
        "analysis": {"status": "ok", "by_code": {"WT405 error": 1}, "errors": [finding], "warnings": []},
    }
    table = tool.markdown(
        {"m": entry}, {"warp": "1.19.0", "wall_s": 120.0, "skipped": {"cuda.x": "needs a GPU"}}
    )
    assert (
        "| m | 3 | FAILED (3 run, 1 F, 1 skipped) | FAILED (3 run, 1 F, 1 skipped) | yes | 1 | 0 | 0 |"
        in table
    )
    assert (
        "test_deterministic_counter.py:113 `counter_kernel`" in table and "| true: the returned slot" in table
    )
    assert "| cuda.x | needs a GPU |" in table
    page = tmp_path / "page.md"
    page.write_text(f"# Title\n\nbefore\n\n{tool.BEGIN}\nold\n{tool.END}\n\nafter\n")
    tool.write_markdown(page, table)
    text = page.read_text()
    assert text.startswith("# Title\n\nbefore\n\n") and text.endswith("\n\nafter\n")
    assert "old" not in text and table in text
