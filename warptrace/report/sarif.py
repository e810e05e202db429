"""SARIF 2.1.0: the findings as code-scanning results (GitHub code scanning, VS Code SARIF viewer).

One ``result`` per finding, rule metadata (name, family, fix, Warp documentation section)
from the rule registry, the default level, description and documentation page (``helpUri``)
from the rule reference (:mod:`warptrace.analysis.ruledocs`), the line to change as the location and the read, write,
allocation and backward lines as related locations. Paths inside the run's working
directory are relative to the ``SRCROOT`` base (the repository, for a run started at its
root), so results line up with the checked-out source.

``partialFingerprints["warptraceFinding/v1"]`` identifies a finding across commits: a
hash of the rule, the file, the enclosing function and the *text* of every located
line, never line numbers, so code moving up or down keeps the fingerprint and changing
the offending line makes a new one.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import TYPE_CHECKING, Any

from warptrace.analysis.findings import Finding, Location, RuleInfo, Severity
from warptrace.analysis.ruledocs import rule_docs, rule_url
from warptrace.analysis.rules import RULE_INFO
from warptrace.report.text import display_path

if TYPE_CHECKING:
    from warptrace.analysis.report import Report

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
FINGERPRINT = "warptraceFinding/v1"
SRCROOT = "SRCROOT"
_LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
_LEVEL_OF_WORD = {"error": "error", "warning": "warning", "info": "note"}


def to_dict(report: Report) -> dict[str, Any]:
    from warptrace import __version__

    cwd = str(report.meta.get("cwd") or "")
    codes = sorted(RULE_INFO)
    for finding in report.findings:  # a code the registry does not know still gets a rule entry
        if finding.code not in codes:
            codes.append(finding.code)
    rule_index = {code: index for index, code in enumerate(codes)}
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "warptrace",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": [_rule(code, RULE_INFO.get(code), report) for code in codes],
            }
        },
        "results": [_result(finding, rule_index[finding.code], cwd) for finding in report.findings],
        "columnKind": "unicodeCodePoints",
        "properties": {
            "trace": report.trace_path,
            "complete": bool(report.meta.get("complete", False)),
            "warpVersion": str(report.meta.get("warp_version") or ""),
            "familiesChecked": list(report.families_checked),
        },
    }
    if cwd:
        run["originalUriBaseIds"] = {SRCROOT: {"uri": _dir_uri(cwd)}}
    argv = report.meta.get("argv")
    if argv:
        run["invocations"] = [
            {
                "commandLine": " ".join(str(a) for a in argv),
                "executionSuccessful": report.meta.get("exit_status") in (0, None),
            }
        ]
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def render(report: Report) -> str:
    return json.dumps(to_dict(report), indent=2) + "\n"


def fingerprint(finding: Finding, cwd: str) -> str:
    """Stable across commits: rule, file, function and the located lines' text, no line numbers."""
    parts = [finding.code]
    for loc in (finding.location, *finding.related):
        parts.append(
            "\x1f".join((loc.role, display_path(loc.file, cwd), loc.function, " ".join(loc.text.split())))
        )
    return hashlib.sha256("\x1e".join(parts).encode("utf-8")).hexdigest()[:32]


def _rule(code: str, info: RuleInfo | None, report: Report) -> dict[str, Any]:
    if info is None:
        name = next((f.name for f in report.findings if f.code == code), code)
        return {"id": code, "name": name, "shortDescription": {"text": name}}
    doc = rule_docs().get(code)
    level = _LEVEL_OF_WORD[doc.level] if doc else "error"
    description = " ".join(doc.sections["Proves"].split()) if doc else ""
    rule: dict[str, Any] = {
        "id": code,
        "name": info.name,
        "shortDescription": {"text": f"{info.name} ({info.family})"},
        "help": {"text": f"Fix: {info.fix}" + (f"\nWarp documentation: {info.doc}" if info.doc else "")},
        "helpUri": rule_url(code),
        "defaultConfiguration": {"level": level},
        "properties": {"family": info.family, "tags": ["gradient", info.family]},
    }
    if description:
        rule["fullDescription"] = {"text": description}
    return rule


def _result(finding: Finding, index: int, cwd: str) -> dict[str, Any]:
    related = []
    for number, loc in enumerate(finding.related, start=1):
        item = _location(loc, cwd)
        item["id"] = number
        item["message"] = {"text": loc.role or "related"}
        related.append(item)
    text = finding.message + (f" (occurred {finding.count} times)" if finding.count > 1 else "")
    if finding.fix:
        text += f". Fix: {finding.fix}"
    result: dict[str, Any] = {
        "ruleId": finding.code,
        "ruleIndex": index,
        "level": _LEVELS[finding.severity],
        "message": {"text": text},
        "locations": [_location(finding.location, cwd)],
        "partialFingerprints": {FINGERPRINT: fingerprint(finding, cwd)},
        "occurrenceCount": max(1, int(finding.count)),
        "properties": {"severity": finding.severity.label},
    }
    if related:
        result["relatedLocations"] = related
    return result


def _location(loc: Location, cwd: str) -> dict[str, Any]:
    artifact: dict[str, Any]
    relative = display_path(loc.file, cwd)
    if relative != loc.file or not os.path.isabs(loc.file):
        artifact = {"uri": relative.replace(os.sep, "/")}
        if cwd:
            artifact["uriBaseId"] = SRCROOT
    else:
        artifact = {"uri": _file_uri(loc.file)}
    physical: dict[str, Any] = {"artifactLocation": artifact}
    if loc.line > 0:
        physical["region"] = {"startLine": int(loc.line)}
        if loc.text:
            physical["region"]["snippet"] = {"text": loc.text}
    location: dict[str, Any] = {"physicalLocation": physical}
    if loc.function:
        location["logicalLocations"] = [{"name": loc.function, "kind": "function"}]
    return location


def _file_uri(path: str) -> str:
    from urllib.parse import quote

    return "file://" + quote(os.path.abspath(path).replace(os.sep, "/"))


def _dir_uri(path: str) -> str:
    uri = _file_uri(path)
    return uri if uri.endswith("/") else uri + "/"
