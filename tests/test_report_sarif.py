"""SARIF 2.1.0: valid against the OASIS schema, one result per finding, registry metadata,
fingerprints that survive moved lines and change with the offending line."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path

import pytest

from tests.recorded import record

SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"


@pytest.fixture(scope="module")
def buggy(tmp_path_factory):
    return record("wt101_force_reuse", tmp_path_factory.mktemp("sarif"))


def _validate(document: dict) -> None:
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is in the test extra")
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft4Validator(schema).validate(document)


def test_valid_against_the_schema(buggy):
    from warptrace.report import render

    document = json.loads(render(buggy[0], "sarif"))
    _validate(document)
    assert document["version"] == "2.1.0"


def test_one_result_per_finding_with_locations(buggy):
    from warptrace.analysis.rules import RULE_INFO
    from warptrace.report import sarif

    report = buggy[0]
    run = sarif.to_dict(report)["runs"][0]
    (result,) = run["results"]
    finding = report.findings[0]
    rules = run["tool"]["driver"]["rules"]
    assert {rule["id"] for rule in rules} >= set(RULE_INFO)
    rule = rules[result["ruleIndex"]]
    assert rule["id"] == result["ruleId"] == "WT101"
    assert rule["name"] == RULE_INFO["WT101"].name
    assert RULE_INFO["WT101"].fix in rule["help"]["text"]
    assert result["level"] == "error" and result["occurrenceCount"] == finding.count
    physical = result["locations"][0]["physicalLocation"]
    assert physical["artifactLocation"] == {
        "uri": "tests/programs/wt101_force_reuse.py",
        "uriBaseId": "SRCROOT",
    }
    assert physical["region"]["startLine"] == finding.location.line
    related = [
        (r["message"]["text"], r["physicalLocation"]["region"]["startLine"])
        for r in result["relatedLocations"]
    ]
    assert related == [(loc.role, loc.line) for loc in finding.related]
    assert run["originalUriBaseIds"]["SRCROOT"]["uri"].startswith("file:///")


def test_fingerprint_ignores_line_numbers_but_not_the_code(buggy):
    from warptrace.report import sarif

    finding = buggy[0].findings[0]
    cwd = buggy[0].meta["cwd"]
    moved = copy.deepcopy(finding)
    moved.location = dataclasses.replace(finding.location, line=finding.location.line + 7)
    moved.related = [dataclasses.replace(loc, line=loc.line + 7) for loc in finding.related]
    moved.message = finding.message.replace("line 70", "line 77")
    assert sarif.fingerprint(moved, cwd) == sarif.fingerprint(finding, cwd)
    changed = copy.deepcopy(finding)
    changed.location = dataclasses.replace(
        finding.location, text=finding.location.text.replace("force", "f2")
    )
    assert sarif.fingerprint(changed, cwd) != sarif.fingerprint(finding, cwd)


def test_clean_report_is_valid_and_empty(tmp_path):
    from warptrace.report import sarif

    report, _ = record("wt101_force_reuse_fixed", tmp_path)
    document = sarif.to_dict(report)
    _validate(document)
    assert document["runs"][0]["results"] == []


def test_rule_metadata_comes_from_the_rule_documentation(tmp_path):
    from warptrace.analysis.ruledocs import rule_docs
    from warptrace.analysis.rules import RULE_INFO
    from warptrace.report import sarif

    assert set(rule_docs()) == set(RULE_INFO)  # every code documented in its rule module
    report, _ = record("wt101_force_reuse", tmp_path)
    rules = {rule["id"]: rule for rule in sarif.to_dict(report)["runs"][0]["tool"]["driver"]["rules"]}
    assert rules["WT101"]["fullDescription"]["text"].startswith("A launch recorded on tape T read buffer B")
    assert rules["WT304"]["defaultConfiguration"]["level"] == "warning"
    assert rules["WT408"]["defaultConfiguration"]["level"] == "note"
    assert rules["WT201"]["defaultConfiguration"]["level"] == "error"
    assert rules["WT403"]["helpUri"].endswith("/rules/WT403/")
