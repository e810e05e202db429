"""What a gradient check measures, decided from a recording alone (no probe runs).

Each program is recorded once (a real Warp run on the CPU); the measurement is the pure
analysis of :mod:`warptrace.analysis.measure`: which read, which parameters (by role),
which backward calls, which objective (``loss=`` and hand seeds).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from warptrace.analysis.measure import measurement, unexercised
from warptrace.analysis.model import Model
from warptrace.analysis.report import analyze_trace
from warptrace.cli import main
from warptrace.errors import UsageError
from warptrace.trace.reader import read_trace

PROGRAMS = Path(__file__).resolve().parent / "programs"
HAS_TORCH = importlib.util.find_spec("torch") is not None


def _line_of(script: Path, text: str) -> int:
    return [i for i, line in enumerate(script.read_text().splitlines(), start=1) if text in line][-1]


@cache
def _trace(name: str, folder: str) -> Path:
    script = PROGRAMS / f"{name}.py"
    trace = Path(folder) / f"{name}.wtrace"
    subprocess.run(
        [sys.executable, "-m", "warptrace", "-q", "--no-analyze", "-o", str(trace), str(script)],
        check=True,
        capture_output=True,
        timeout=900,
    )
    return trace


@pytest.fixture(scope="module")
def record(tmp_path_factory):
    folder = tmp_path_factory.mktemp("measure")

    def make(name: str) -> Model:
        return Model(read_trace(_trace(name, str(folder))))

    return make


# ------------------------------------------------------------------ identity by role


def test_a_rebuilt_parameter_is_a_new_parameter_each_iteration(record):
    script = PROGRAMS / "ok_flow_rebuilt_param.py"
    model = record("ok_flow_rebuilt_param")
    first = measurement(model)
    assert first.undecided is None
    assert first.backwards == [1]  # a fresh array's gradient starts at zero: one backward per read
    assert not first.notes  # no "not cleared between reads" (the false disagree)
    (param,) = first.params
    assert param.role is not None
    assert (param.role.line, param.role.ordinal, param.role.shape) == (
        _line_of(script, "p = wp.array(np.full"),
        0,
        (4,),
    )
    assert param.window == [1]
    assert len(first.reads) == 3
    rebuilt = _line_of(script, "p = wp.array(p.numpy()")
    second = measurement(model, 2)
    assert second.backwards == [2]
    assert [(p.role.line, p.role.ordinal) for p in second.params if p.role] == [(rebuilt, 0)]
    last = measurement(model, "last")
    assert last.backwards == [3]
    assert [(p.role.line, p.role.ordinal) for p in last.params if p.role] == [(rebuilt, 1)]
    assert measurement(model, "mid").backwards == [2]


def test_at_beyond_the_reads_is_a_usage_error(record):
    with pytest.raises(UsageError, match="3 gradient read"):
        measurement(record("ok_flow_rebuilt_param"), 4)


def test_a_parameter_kept_in_numpy_and_uploaded_each_iteration(record):
    model = record("wt102_numpy_outside_fixed")
    for at in (1, 2, 3):
        chosen = measurement(model, at)
        assert chosen.backwards == [at]
        assert [(p.label, p.window) for p in chosen.params] == [("q0", [at])]


def test_a_parameter_rebuilt_in_a_class(record):
    script = PROGRAMS / "wt401_class_rebuilt_fixed.py"
    chosen = measurement(record("wt401_class_rebuilt_fixed"), "last")
    assert chosen.backwards == [3]
    # step 3 reads the array step 2 rebuilt: the second one made at that line
    rebuilt = _line_of(script, "self.w = wp.array(self.w.numpy()")
    assert [(p.label, p.role.line, p.role.ordinal) for p in chosen.params if p.role] == [
        ("self.w", rebuilt, 1)
    ]


# ------------------------------------------------------------------ hand seeds


@pytest.mark.parametrize(
    ("name", "how", "label"),
    [
        ("wt102_seed_grads_fixed", "grads=", "y"),
        ("wt101_seed_fill_fixed", "fill_", "y"),
        ("wt401_seed_set_grad_fixed", ".grad =", "y"),
    ],
)
def test_a_hand_seed_is_measured_as_sum_of_seed_times_output(record, name, how, label):
    chosen = measurement(record(name))
    assert chosen.undecided is None
    assert [(seed.label, seed.how, seed.backward) for seed in chosen.seeds] == [(label, how, 1)]
    assert chosen.describe() == f"the gradient of Σ seed·{label}"


# ------------------------------------------------------------------ reads through torch


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_a_shared_gradient_never_cleared_moves_the_default_to_read_2(record):
    chosen = measurement(record("wt203_torch_bridge"))
    assert chosen.read is not None and chosen.read.number == 2
    assert chosen.backwards == [1, 2]
    assert any("not cleared between reads 1 and 2" in note for note in chosen.notes)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_a_gradient_shared_with_torch_is_read_after_each_backward(record):
    script = PROGRAMS / "wt301_torch_optimizer_fixed.py"
    chosen = measurement(record("wt301_torch_optimizer_fixed"))
    assert chosen.read is not None and chosen.read.implicit
    assert len(chosen.reads) == 3  # no read is visible: torch's optimizer reads after each backward
    (param,) = chosen.params
    assert param.role is not None and param.role.line == _line_of(script, "x = wp.from_torch")
    assert not chosen.notes


# ------------------------------------------------------------------ the default read


def test_a_tape_never_reset_moves_the_default_to_the_read_that_replays_old_forwards(record):
    script = PROGRAMS / "wt204_tape_kept.py"
    chosen = measurement(record("wt204_tape_kept"))
    assert chosen.read is not None and chosen.read.number == 2
    assert chosen.backwards == [2]
    assert any("replays operations recorded before read 1" in note for note in chosen.notes)
    # perturbed at iteration 2's launch, after tape.zero() cleared w.grad: not at position 0
    (param,) = chosen.params
    assert param.position > 0 and param.read_location.line == _line_of(script, "wp.launch(predict")


def test_a_tape_backpropagated_again_without_a_new_forward_keeps_the_first_read(record):
    # Jacobian rows: one recording, a seed per backward, nothing recorded after read 1
    chosen = measurement(record("ok_acc_jacobian_rows"))
    assert chosen.read is not None and chosen.read.number == 1 and chosen.undecided is None
    # read 2 replays only the forward recorded before read 1: its objective was not recomputed
    later = measurement(record("ok_acc_jacobian_rows"), at=2)
    assert later.undecided is not None and "the objective is not recomputed" in later.undecided


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_a_recording_replayed_after_a_torch_step_is_not_measured_at_the_later_reads(record):
    # recorded once, backpropagated after each torch optimizer step: the loss array keeps the
    # first forward's value, so only read 1 is a gradient of what the program computed
    chosen = measurement(record("ok_bridge_torch_optimizer"))
    assert chosen.read is not None and chosen.read.number == 1 and chosen.undecided is None


def test_a_gradient_handed_to_another_segment_is_no_read(record):
    # q_end.grad.assign(ckpt_q[s + 1].grad) between checkpoint segments: the read is force.grad at the end
    chosen = measurement(record("wt303_checkpoint_fixed"))
    assert [p.label for p in chosen.params] == ["force"]
    assert chosen.undecided is not None and "adjoint computed from another gradient" in chosen.undecided


def test_reading_the_gradient_of_an_array_no_tape_touches_is_undecided(record):
    chosen = measurement(record("wt309_untaped_init"))
    assert chosen.undecided is not None and "no backpropagated tape reads" in chosen.undecided
    assert "angle" in chosen.undecided


# ------------------------------------------------------------------ what an agreement covers


def test_findings_a_read_does_not_exercise_name_the_read_that_does(record):
    model = record("wt203_train_loop")
    findings = analyze_trace(model.trace).findings
    missed = unexercised(findings, model, measurement(model, 1))
    assert [(f.code, later) for f, later in missed] == [("WT203", 2)]
    assert unexercised(findings, model, measurement(model, 2)) == []


# ------------------------------------------------------------------ --at


@pytest.mark.parametrize("value", ["0", "x", "first,", "-1"])
def test_at_values_are_checked(value, capsys):
    assert main(["gradcheck", "--at", value, str(PROGRAMS / "ok_flow_rebuilt_param.py")]) == 2
    assert "--at" in capsys.readouterr().err
