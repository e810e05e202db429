"""gradcheck and bisect --run through captured graphs (probe runs: real Warp on the CPU).

Forward and backward captured once (``wp.ScopedCapture``) and replayed every optimizer step
(``wp.capture_launch``): the probe perturbs the parameters just before the measured replay
and reads the objective, the gradient and the readable cuts just after it.
``tools/sweep_gradcheck.py`` runs every zoo program; these pin the behaviour.
"""

from __future__ import annotations

import contextlib
import io
import json
from functools import cache
from pathlib import Path

import pytest
import warp

from warptrace.cli import main

# the programs capture a tape on the CPU, which Warp supports from 1.15 (their requires-warp)
_WARP = tuple(int(part) for part in warp.__version__.split(".")[:2])
pytestmark = pytest.mark.skipif(_WARP < (1, 15), reason="CPU graph capture of a tape needs warp-lang >= 1.15")

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "tests" / "programs"
EPS = "1e-2,1e-3"


def _line_of(script: Path, text: str) -> int:
    return [i for i, line in enumerate(script.read_text().splitlines(), start=1) if text in line][-1]


@cache
def _measure(argv: tuple[str, ...]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main([*argv[:-1], "-q", "--format", "json", "--eps", EPS, argv[-1]])
    return status, out.getvalue()


def measure(*argv: str | Path) -> tuple[int, dict]:
    status, text = _measure(tuple(str(a) for a in argv))
    return status, json.loads(text)


def _through_replays(result: dict) -> bool:
    return any("measured through graph replays" in note for note in result["notes"])


def test_war_inside_a_captured_forward_disagrees():
    _, result = measure("gradcheck", PROGRAMS / "wt101_graph_train.py")
    assert result["verdict"] == "disagree", result
    assert _through_replays(result)
    assert result["read"]["number"] == 1


def test_captured_training_step_agrees():
    status, result = measure("gradcheck", PROGRAMS / "wt101_graph_train_fixed.py")
    assert status == 0, result
    assert result["verdict"] == "agree"
    assert _through_replays(result)


def test_hand_seed_consumed_by_the_replayed_backward_is_taken_from_the_recording():
    # Warp zeroes the adjoint of a plain store: after the replay costs.grad holds zeros, not the
    # fill_(1/N) seed; the objective is Σ seed·costs with the recorded constant
    status, result = measure("gradcheck", PROGRAMS / "wt304_graph_seed_fixed.py")
    assert status == 0, result
    assert result["verdict"] == "agree"
    assert _through_replays(result)


def test_bisect_inside_a_graph_brackets_the_overwrite():
    script = PROGRAMS / "wt101_graph_train.py"
    _, result = measure("bisect", "--run", script)
    assert result["verdict"] == "disagree", result
    # the live buffers of every cut are overwritten later in the replay: the copies the probe run
    # captured into the graph at each cut are what is read, so the first cut already brackets it
    first = result["first_disagreeing"]
    assert first["cut"] == 1 and first["last_agreeing_cut"] == 0
    assert ("WT101", _line_of(script, "self.state.assign(self.next_state)")) in [
        (f["code"], f["line"]) for f in first["findings"]
    ]
    assert [cut["k"] for cut in result["cuts"]] == [1, 2, 3, 4, 5, 6]


def test_bisect_inside_a_graph_every_cut_of_a_correct_program_agrees():
    status, result = measure("bisect", "--run", PROGRAMS / "wt101_graph_train_fixed.py")
    assert status == 0, result
    assert result["verdict"] == "agree"
    assert result["cuts"] and all(cut["verdict"] == "agree" for cut in result["cuts"])


_RESET_INSIDE_THE_GRAPH = """
import numpy as np
import warp as wp

wp.config.quiet = True


@wp.kernel
def square(k: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, k[i] * k[i])


k = wp.array(np.array([1.0, 2.0, 3.0]), dtype=float, requires_grad=True, device="cpu")
start = wp.array(np.array([0.5, -1.0, 2.0]), dtype=float, device="cpu")
loss = wp.zeros(1, dtype=float, requires_grad=True, device="cpu")
with wp.ScopedCapture(device="cpu") as capture:
    wp.copy(k, start)  # untaped: the graph resets the parameter before its tape reads it
    loss.zero_()
    tape = wp.Tape()
    with tape:
        wp.launch(square, 3, inputs=[k], outputs=[loss], device="cpu")
    tape.backward(loss)
for _ in range(3):
    wp.capture_launch(capture.graph)
    print(k.grad.numpy())
    tape.zero()
"""


def test_a_parameter_the_graph_writes_before_reading_is_undecided(tmp_path):
    # a perturbation made before the replay would be overwritten inside it: finite differences
    # of zero against a nonzero gradient, a false "disagree" without the check
    script = tmp_path / "reset_inside.py"
    script.write_text(_RESET_INSIDE_THE_GRAPH)
    _, result = measure("gradcheck", script)
    assert result["verdict"] == "undecided", result
    assert "before its tape reads it" in result["reason"]


def test_forward_captured_alone_and_backpropagated_eagerly():
    # the replay runs the forward (the parameters are perturbed just before it); the backward,
    # the objective and the gradient are eager. The buggy program overwrites the forward's input
    # between the replay and the backward (WT103)
    _, result = measure("gradcheck", PROGRAMS / "wt103_capture_eager_backward.py")
    assert result["verdict"] == "disagree", result
    assert any("at the eager backward that follows" in note for note in result["notes"])
    status, result = measure("gradcheck", PROGRAMS / "wt103_capture_eager_backward_fixed.py")
    assert status == 0, result
    assert result["verdict"] == "agree"
