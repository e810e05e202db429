"""gradcheck and bisect --run on the loop shapes users write (probe runs: real Warp on the CPU).

Parameters rebuilt every iteration (from ``numpy()``, from a NumPy array kept outside
Warp, in a class), hand-seeded backward calls, gradients read through torch, and the
choice of the read measured. ``tools/sweep_gradcheck.py`` runs the same checks over every
program; these are the few that pin the behaviour.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
from functools import cache
from pathlib import Path

import pytest

from warptrace.cli import main

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "tests" / "programs"
EPS = "1e-2,1e-3"
HAS_TORCH = importlib.util.find_spec("torch") is not None


def _line_of(script: Path, text: str) -> int:
    return [i for i, line in enumerate(script.read_text().splitlines(), start=1) if text in line][-1]


@cache
def _measure(argv: tuple[str, ...]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main([*argv[:-1], "-q", "--format", "json", "--eps", EPS, argv[-1]])
    return status, out.getvalue()


def measure(*argv: str) -> tuple[int, dict]:
    status, text = _measure(tuple(str(a) for a in argv))
    return status, json.loads(text)


def _locations(result: dict) -> list[tuple[str, int]]:
    return [(Path(loc["file"]).name, loc["line"]) for loc in result["first_disagreeing"]["locations"]]


# ------------------------------------------------------------------ rebuilt parameters


def test_rebuilt_parameter_loop_agrees():
    # the issue's reproduction: "disagree" (88%) when the iterations' arrays were one parameter
    script = PROGRAMS / "ok_flow_rebuilt_param.py"
    status, result = measure("gradcheck", script)
    assert status == 0, result
    assert result["verdict"] == "agree"
    assert [w["backward"] for w in result["window"]] == [1]
    (param,) = result["parameters"]
    assert param["role"]["line"] == _line_of(script, "p = wp.array(np.full")
    assert result["read"]["number"] == 1 and result["read"]["of"] == 3
    assert not any("not cleared" in note for note in result["notes"])


def test_rebuilt_parameter_every_read_agrees():
    status, result = measure("gradcheck", "--at", "first,mid,last", PROGRAMS / "wt101_rebuilt_numpy_fixed.py")
    assert status == 0, result
    assert [(s["read"]["number"], s["verdict"]) for s in result["samples"]] == [
        (1, "agree"),
        (2, "agree"),
        (3, "agree"),
    ]
    assert len(result["runs"]) == 1 + 3 * (2 + 2 * 2)  # one recording, then each read's runs


def test_bisect_run_brackets_the_defect_of_a_parameter_uploaded_each_iteration():
    # `q0 = wp.array(q0_np, dtype=wp.vec3, requires_grad=True)` at the top of each iteration: bisect
    # used to give up ("q0 never reached their recorded first read")
    script = PROGRAMS / "wt102_numpy_outside.py"
    status, result = measure("bisect", "--run", script)
    assert status == 1, result
    assert result["verdict"] == "disagree" and result["end_to_end"]["verdict"] == "disagree"
    assert [p["label"] for p in result["parameters"]] == ["q0"]
    assert _locations(result) == [(script.name, _line_of(script, "wp.launch(squash"))]


def test_bisect_run_in_a_class_names_the_in_place_product():
    script = PROGRAMS / "wt401_class_rebuilt.py"
    status, result = measure("bisect", "--run", "--at", "2", script)
    assert status == 1, result
    assert [w["backward"] for w in result["window"]] == [2]
    assert _locations(result) == [(script.name, _line_of(script, "wp.launch(apply_gain"))]


# ------------------------------------------------------------------ hand seeds


def test_hand_seeded_backward_is_measured():
    status, result = measure("gradcheck", PROGRAMS / "wt102_seed_grads_fixed.py")
    assert status == 0, result
    assert result["measured"] == "the gradient of Σ seed·y"
    assert [(s["array"], s["how"]) for s in result["window"][0]["seeds"]] == [("y", "grads=")]
    script = PROGRAMS / "wt102_seed_grads.py"
    status, result = measure("bisect", "--run", script)
    assert status == 1, result
    assert _locations(result) == [(script.name, _line_of(script, "wp.launch(warp_in_place"))]


def test_fill_seed_disagrees_when_the_tape_is_wrong():
    status, result = measure("gradcheck", PROGRAMS / "wt101_seed_fill.py")
    assert status == 1, result
    assert result["measured"] == "the gradient of Σ seed·y"
    assert result["window"][0]["seeds"][0]["how"] == "fill_"


# ------------------------------------------------------------------ which read; what agree covers


def test_agree_lists_the_error_findings_it_did_not_exercise(capsys):
    script = PROGRAMS / "wt203_train_loop.py"
    status, result = measure("gradcheck", "--at", "1", script)
    assert status == 0, result
    assert [(f["code"], f["at"]) for f in result["unexercised_findings"]] == [("WT203", 2)]
    assert main(["gradcheck", "-q", "--at", "1", "--eps", EPS, str(script)]) == 0
    text = capsys.readouterr().out
    assert "not exercised by this measurement" in text and "--at 2 measures it" in text


# ------------------------------------------------------------------ torch

TORCH_OPTIMIZER = """
import numpy as np
import torch
import warp as wp

wp.config.quiet = True
wp.init()

@wp.kernel
def energy(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, wp.sin(x[i]) * x[i])

x_t = torch.tensor(np.linspace(0.1, 1.0, 5), dtype=torch.float32, requires_grad=True)
opt = torch.optim.SGD([x_t], lr=0.1)
x = wp.from_torch(x_t)
for it in range(3):
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(energy, 5, inputs=[x], outputs=[loss])
    tape.backward(loss)
    opt.step()
    opt.zero_grad(set_to_none=False)  # clears x.grad out of Warp's sight
"""

TORCH_FUNCTION = """
import numpy as np
import torch
import warp as wp

wp.config.quiet = True
wp.init()

@wp.kernel
def sin_times(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.sin(x[i]) * x[i]

class WarpSinTimes(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x_t):
        ctx.x = wp.from_torch(x_t.detach().clone(), requires_grad=True)
        ctx.y = wp.zeros(x_t.shape[0], dtype=float, requires_grad=True)
        ctx.tape = wp.Tape()
        with ctx.tape:
            wp.launch(sin_times, x_t.shape[0], inputs=[ctx.x], outputs=[ctx.y])
        return wp.to_torch(ctx.y).clone()

    @staticmethod
    def backward(ctx, adj_y):
        ctx.tape.backward(grads={ctx.y: wp.from_torch(adj_y.contiguous())})
        return wp.to_torch(ctx.x.grad).clone()

x_t = torch.tensor(np.linspace(0.1, 1.0, 5), dtype=torch.float32, requires_grad=True)
opt = torch.optim.SGD([x_t], lr=0.1)
for it in range(3):
    opt.zero_grad()
    y = WarpSinTimes.apply(x_t)
    (y * y).sum().backward()
    opt.step()
"""


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_torch_optimizer_read_after_an_unseen_clear_agrees(tmp_path):
    script = tmp_path / "torch_optimizer.py"
    script.write_text(TORCH_OPTIMIZER)
    status, result = measure("gradcheck", "--at", "2", script)
    assert status == 0, result
    assert result["read"]["shared"] is True
    assert [w["backward"] for w in result["window"]] == [2]  # zero_grad cleared backward 1 out of sight
    assert any("seen in a probe run" in note for note in result["notes"])


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_torch_autograd_function_around_a_tape_agrees(tmp_path):
    script = tmp_path / "torch_function.py"
    script.write_text(TORCH_FUNCTION)
    status, result = measure("gradcheck", script)
    assert status == 0, result
    assert result["measured"] == "the gradient of Σ seed·ctx.y"  # the seed torch hands in: 2y
    assert [w["backward"] for w in result["window"]] == [1]
