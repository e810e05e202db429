"""The kernel-source rules WT401-WT408 rank a pattern by what the trace proves: the same
source line is an error with a gradient through it on a backpropagated tape, info on a tape
never backpropagated; the finding names the gradient-carrying argument and the launch."""

from __future__ import annotations

import pytest

from tests.zoo import PROGRAMS, Program, load
from warptrace.analysis.findings import Severity


def _report(name: str, tmp_path):
    import warptrace

    program = Program(PROGRAMS / name)
    module = load(program, module_name="kernel_rules_" + name.replace("/", "_").replace(".py", ""))
    trace = tmp_path / "run.wtrace"
    warptrace.start(trace)
    try:
        module.run()
    finally:
        warptrace.stop()
    return warptrace.analyze(trace)


@pytest.mark.parametrize(
    ("name", "code", "severity", "words"),
    [
        (
            "wt401_gain.py",
            "WT401",
            Severity.ERROR,
            ("`gain`", "launch on line 33", "backpropagated on line 35"),
        ),
        ("wt401_forward_only.py", "WT401", Severity.INFO, ("never backpropagated",)),
        (
            "wt401_off_the_loss.py",
            "WT401",
            Severity.INFO,
            ("backpropagated (line 39), but no recorded launch or copy links it to the loss",),
        ),
        ("wt407_springs.py", "WT407", Severity.WARNING, ("`positions` carries the gradient",)),
        (
            "wt408_quantize.py",
            "WT408",
            Severity.INFO,
            ("`weights` carries the gradient", "correct, not a bug"),
        ),
    ],
)
def test_severity_comes_from_the_trace(name, code, severity, words, tmp_path):
    findings = [f for f in _report(name, tmp_path).findings if f.code == code]
    assert len(findings) == 1
    found = findings[0]
    assert found.severity == severity
    for word in words:
        assert word in found.message
    assert found.related and found.related[0].role == "launch"
