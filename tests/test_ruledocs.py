"""The rule reference (warptrace.analysis.ruledocs) and `explain`: every rule documented in full,
pages rendered from the docstrings with examples from the zoo, the same page in the terminal."""

from __future__ import annotations

import dataclasses

import pytest

from warptrace.analysis import ruledocs
from warptrace.analysis.rules import RULE_INFO
from warptrace.cli import main

DOC = """Maintainers' introduction, not rendered.

WT999 made-up-rule
    Summary: a rule for the test
    Severity: warning (error when it matters)
    Proves:
        Something ``quoted``.

        A second paragraph.
    Mechanism:
        Why.
    Example: wt403_product
    Look-alikes: ok_src_loops,
        ok_src_guards
    Fix: inline fix
    Silent on:
        Nothing.
    Warp documentation:
        "Differentiability".

Free text after the block ends it.
"""


def test_every_rule_is_documented_in_full_and_its_examples_exist():
    assert ruledocs.problems() == []
    assert set(ruledocs.rule_docs()) == set(RULE_INFO)


def test_parse_reads_the_sections_of_a_code_block():
    doc = ruledocs.parse(DOC, "somewhere")["WT999"]
    assert doc.name == "made-up-rule" and doc.module == "somewhere"
    assert doc.sections["Proves"] == "Something `quoted`.\n\nA second paragraph."
    assert doc.sections["Fix"] == "inline fix"
    assert doc.level == "warning" and doc.summary == "a rule for the test"
    assert ruledocs.lookalikes_of(doc) == ["ok_src_loops", "ok_src_guards"]
    assert ruledocs.example_of(doc) == ("wt403_product", "")
    assert "Free text" not in str(doc.sections)


def test_a_missing_section_or_a_wrong_example_is_a_problem(monkeypatch):
    docs = dict(ruledocs.rule_docs())
    sections = dict(docs["WT403"].sections)
    del sections["Mechanism"]
    docs["WT403"] = dataclasses.replace(docs["WT403"], sections=sections)
    sections = dict(docs["WT401"].sections, Example="wt403_product")  # shows WT403, not WT401
    docs["WT401"] = dataclasses.replace(docs["WT401"], sections=sections)
    sections = dict(docs["WT402"].sections, **{"Look-alikes": "ok_no_such_program"})
    docs["WT402"] = dataclasses.replace(docs["WT402"], sections=sections)
    del docs["WT101"]
    monkeypatch.setattr(ruledocs, "rule_docs", lambda: docs)
    problems = ruledocs.problems()
    assert any(p.startswith("WT403: no 'Mechanism' section") for p in problems)
    assert any(p.startswith("WT401: example 'wt403_product'") for p in problems)
    assert any(p.startswith("WT402: look-alike 'ok_no_such_program'") for p in problems)
    assert any(p.startswith("WT101: no `WT101 overwrite-after-read` block") for p in problems)
    assert len(problems) == 4


def test_a_page_holds_every_section_and_the_zoo_example_with_its_fix():
    page = ruledocs.render("WT403")
    assert page.startswith("# WT403 dynamic-loop-carry\n")
    for title in ("What it proves", "Warp's mechanism", "The evidence in the trace", "Example", "Fix",
                  "Look-alikes it stays silent on", "Warp documentation"):  # fmt: skip
        assert f"\n## {title}\n" in page
    assert "`tests/programs/wt403_product.py`" in page
    assert "p *= rates[k]  # <- WT403" in page  # the marker, as a note
    assert "# expect:" not in page
    assert "```diff" in page and "+    for k in range(COUNT):" in page  # the fixed twin, as a diff
    assert "- `ok_src_loops`: loops whose gradients are exact" in page


def test_without_the_zoo_the_page_points_at_the_site():
    page = ruledocs.render("WT101", zoo=None)
    assert "```python" not in page and "the online page shows them" in page
    assert "## Fix" in page


def test_explain_prints_the_page(capsys):
    assert main(["explain", "wt403"]) == 0
    out = capsys.readouterr().out
    assert out == ruledocs.render("WT403") + f"\nOnline: {ruledocs.rule_url('WT403')}\n"


def test_explain_without_a_code_lists_the_rules(capsys):
    assert main(["explain"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[: len(RULE_INFO)]] == sorted(RULE_INFO)
    assert lines[0].split()[:3] == ["WT101", "overwrite-after-read", "error"]


@pytest.mark.parametrize("code", ["WT999", "overwrite-after-read"])
def test_explain_of_an_unknown_code_is_a_one_line_error(capsys, code):
    assert main(["explain", code]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "unknown rule code" in captured.err


def test_the_docs_url_is_the_one_place_rule_links_come_from():
    assert ruledocs.DOCS_URL.endswith("/")
    assert ruledocs.rule_url("WT101") == ruledocs.DOCS_URL + "rules/WT101/"
