"""WT101-WT105 on synthetic traces: the edge cases real programs rarely isolate."""

from __future__ import annotations

import json

import pytest

from tests.tracebuilder import TraceBuilder
from warptrace.analysis.findings import Severity
from warptrace.analysis.rules import RULE_INFO
from warptrace.report import json as json_report
from warptrace.report import text as text_report
from warptrace.trace import schema as S


def codes(report) -> list[tuple[str, int, str]]:
    """(code, line, severity) of the memory findings (other rule families may see these traces too)."""
    return sorted((f.code, f.location.line, f.severity.label) for f in report.findings if f.code in MEMORY)


MEMORY = {code for code, info in RULE_INFO.items() if info.family == "memory"}


def memory_findings(report):
    return [f for f in report.findings if f.code in MEMORY]


def simple_step(tb: TraceBuilder):
    """A kernel reading x and storing y, a loss kernel, and their arrays."""
    x = tb.array("x", requires_grad=True, line=1)
    y = tb.array("y", requires_grad=True, line=2)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=3)
    step = tb.kernel("step", line=100, x="r", y="w")
    total = tb.kernel("total", line=110, y="r", loss="a")
    return x, y, loss, step, total


# ---------------------------------------------------------------- WT101
def test_force_buffer_reused_every_step_is_one_grouped_finding(tmp_path):
    tb = TraceBuilder()
    k = tb.array("k", requires_grad=True, line=5)
    states = [tb.array("states", requires_grad=True, line=6) for _ in range(501)]
    force = tb.array("force", requires_grad=True, line=7)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=8)
    spring = tb.kernel("spring_force", line=100, q="r", k="r", force="w")
    integrate = tb.kernel("integrate", line=110, q="r", force="r", q_next="w")
    total = tb.kernel("sum_squares", line=120, q="r", loss="a")
    tape = tb.tape(line=9)
    with tb.recording(tape, line=10):
        for i in range(500):
            tb.launch(spring, q=states[i], k=k, force=force, line=12)
            tb.launch(integrate, q=states[i], force=force, q_next=states[i + 1], line=13)
        tb.launch(total, q=states[-1], loss=loss, line=14)
    tb.backward(tape, loss, line=15)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT101", 12, "error")]
    finding = memory_findings(report)[0]
    assert finding.count == 499
    assert "`spring_force`" in finding.message and "`integrate`" in finding.message
    assert "`force`" in finding.message
    roles = {loc.role: loc.line for loc in finding.related}
    assert roles == {"read": 13, "allocation": 7, "backward": 15}
    assert finding.location.role == "overwrite"


@pytest.mark.parametrize("reuse_tape", [False, True])
def test_training_loop_counts_every_iteration(tmp_path, reuse_tape):
    """One bug per iteration of a 20-iteration loop (a new tape each time, or one tape reset)."""
    tb = TraceBuilder()
    x, y, loss, step, total = simple_step(tb)
    update = tb.kernel("sgd_step", line=130, x="rw")
    tape = tb.tape(line=5)
    for _ in range(20):
        if not reuse_tape:
            tape = tb.tape(line=5)
        with tb.recording(tape):
            tb.launch(step, x=x, y=y, line=10)
            tb.launch(total, y=y, loss=loss, line=11)
        tb.memset(x, line=12)  # WT103: before the backward
        tb.backward(tape, loss, line=13)
        tb.launch(update, x=x, line=14)  # fine: after the backward
        tb.memset(loss, line=15)
        if reuse_tape:
            tb.reset(tape, line=16)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT103", 12, "error")]
    assert memory_findings(report)[0].count == 20


def test_pingpong_names_the_buffer_roles(tmp_path):
    tb = TraceBuilder()
    w = tb.array("w", requires_grad=True, line=4)
    bufs = [tb.array("bufs", requires_grad=True, line=5), tb.array("bufs", requires_grad=True, line=6)]
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=7)
    advance = tb.kernel("advance", line=100, x="r", w="r", x_next="w")
    total = tb.kernel("sum_squares", line=110, x="r", loss="a")
    tape = tb.tape()
    with tb.recording(tape):
        for t in range(6):
            tb.launch(advance, x=bufs[t % 2], w=w, x_next=bufs[(t + 1) % 2], line=20)
        tb.launch(total, x=bufs[0], loss=loss, line=21)
    tb.backward(tape, loss, line=22)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT101", 20, "error")]
    finding = memory_findings(report)[0]
    assert finding.count == 5
    assert "`x`" in finding.message and "`x_next`" in finding.message
    assert "ping-pong" in finding.message and "`bufs`" in finding.message


def test_fresh_array_each_step_is_fine(tmp_path):
    tb = TraceBuilder()
    w = tb.array("w", requires_grad=True, line=4)
    advance = tb.kernel("advance", line=100, x="r", w="r", x_next="w")
    total = tb.kernel("sum_squares", line=110, x="r", loss="a")
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=7)
    state = tb.array("inp", requires_grad=True, line=5)
    tape = tb.tape()
    with tb.recording(tape):
        for _ in range(5):
            out = tb.array("out", requires_grad=True, line=8)
            tb.copy(out, state, line=8)  # out = wp.clone(inp)
            tb.launch(advance, x=state, w=w, x_next=out, line=9)
            state = out
        tb.launch(total, x=state, loss=loss, line=10)
    tb.backward(tape, loss, line=11)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


def test_copy_memset_and_native_are_write_paths(tmp_path):
    tb = TraceBuilder()
    x, y, loss, step, total = simple_step(tb)
    src = tb.array("corrected", requires_grad=True, line=4)
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(step, x=x, y=y, line=10)
        tb.launch(total, y=y, loss=loss, line=11)
        tb.copy(x, src, line=12)  # recorded copy
        tb.memset(y, line=13)  # y read by `total`
    tb.backward(tape, loss, line=14)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT101", 12, "error"), ("WT101", 13, "error")]
    copy_finding = next(f for f in report.findings if f.location.line == 12)
    assert "copy" in copy_finding.message and "1.17" in copy_finding.message


def test_copy_wording_depends_on_warp_version(tmp_path):
    tb = TraceBuilder(warp_version="1.16.0")
    x, y, loss, step, total = simple_step(tb)
    src = tb.array("corrected", requires_grad=True, line=4)
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(step, x=x, y=y, line=10)
        tb.copy(x, src, line=12)
        tb.launch(total, y=y, loss=loss, line=11)
    tb.backward(tape, loss, line=14)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT101", 12, "error")]
    assert "1.17" not in memory_findings(report)[0].message


def test_strided_views_overlap_exactly(tmp_path):
    tb = TraceBuilder()
    base = tb.array("base", shape=(8,), requires_grad=True, line=1)
    even = tb.view(base, offset=0, shape=(4,), strides=(2,), label="even", line=2)
    odd = tb.view(base, offset=1, shape=(4,), strides=(2,), label="odd", line=3)
    head = tb.view(base, offset=0, shape=(2,), label="head", line=4)
    out = tb.array("out", requires_grad=True, line=5)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=6)
    read = tb.kernel("reader", line=100, x="r", y="w")
    write = tb.kernel("writer", line=110, y="w")
    total = tb.kernel("total", line=120, y="r", loss="a")
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(read, x=even, y=out, line=10)
        tb.launch(write, y=odd, line=11)  # interleaved, disjoint: fine
        tb.launch(write, y=head, line=12)  # shares element 0 with `even`
        tb.launch(total, y=out, loss=loss, line=13)
    tb.backward(tape, loss, line=14)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT101", 12, "error")]
    message = memory_findings(report)[0].message
    assert "different Python object" in message and "`even`" in message and "`head`" in message


@pytest.mark.parametrize("dest_offset, count, expected", [(4, 4, []), (2, 4, [("WT101", 11, "error")])])
def test_partial_copy_overwrites_only_its_window(tmp_path, dest_offset, count, expected):
    tb = TraceBuilder()
    buf = tb.array("buf", shape=(8,), requires_grad=True, line=1)
    head = tb.view(buf, offset=0, shape=(4,), label="head", line=2)
    src = tb.array("src", shape=(4,), requires_grad=True, line=3)
    out = tb.array("out", requires_grad=True, line=4)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=5)
    read = tb.kernel("reader", line=100, x="r", y="w")
    total = tb.kernel("total", line=110, y="r", loss="a")
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(read, x=head, y=out, line=10)
        tb.copy(buf, src, dest_offset=dest_offset, count=count, line=11)
        tb.launch(total, y=out, loss=loss, line=12)
    tb.backward(tape, loss, line=13)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == expected


def test_accumulating_write_after_read_is_a_warning(tmp_path):
    tb = TraceBuilder()
    x, y, loss, step, total = simple_step(tb)
    bump = tb.kernel("bump", line=120, x="a")
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(step, x=x, y=y, line=10)
        tb.launch(bump, x=x, line=11)
        tb.launch(total, y=y, loss=loss, line=12)
    tb.backward(tape, loss, line=13)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT101", 11, "warning")]
    assert "accumulates" in memory_findings(report)[0].message


def test_memset_then_accumulate_reports_only_the_memset(tmp_path):
    """`force.zero_()` then atomic scatter: the memset is the overwrite, the scatter repeats nothing."""
    tb = TraceBuilder()
    q = tb.array("q", requires_grad=True, line=1)
    force = tb.array("force", requires_grad=True, line=2)
    out = [tb.array("out", requires_grad=True, line=3) for _ in range(3)]
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=4)
    scatter = tb.kernel("spring_forces", line=100, q="r", force="a")
    integrate = tb.kernel("integrate", line=110, force="r", out="w")
    total = tb.kernel("total", line=120, out="r", loss="a")
    tape = tb.tape()
    with tb.recording(tape):
        for t in range(3):
            tb.memset(force, line=10)
            tb.launch(scatter, q=q, force=force, line=11)
            tb.launch(integrate, force=force, out=out[t], line=12)
        tb.launch(total, out=out[-1], loss=loss, line=13)
    tb.backward(tape, loss, line=14)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT101", 10, "error")]
    assert memory_findings(report)[0].count == 2


def test_write_after_backward_is_not_reported(tmp_path):
    tb = TraceBuilder()
    x, y, loss, step, total = simple_step(tb)
    update = tb.kernel("sgd_step", line=130, x="rw")
    for _ in range(3):
        tape = tb.tape()
        with tb.recording(tape):
            tb.launch(step, x=x, y=y, line=10)
            tb.launch(total, y=y, loss=loss, line=11)
        tb.backward(tape, loss, line=12)
        tb.launch(update, x=x, line=13)  # optimizer: untaped, after backward
        tb.memset(loss, line=14)
        tb.zero(tape, line=15)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


def test_tape_never_backpropagated_is_not_reported(tmp_path):
    tb = TraceBuilder()
    x, y, _loss, step, _total = simple_step(tb)
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(step, x=x, y=y, line=10)
        tb.memset(x, line=11)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


def test_reset_clears_pending_reads(tmp_path):
    tb = TraceBuilder()
    x, y, loss, step, total = simple_step(tb)
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(step, x=x, y=y, line=10)
    tb.reset(tape, line=11)
    tb.memset(x, line=12)  # the read was discarded with the reset
    with tb.recording(tape):
        tb.launch(step, x=x, y=y, line=13)
        tb.launch(total, y=y, loss=loss, line=14)
    tb.backward(tape, loss, line=15)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


def test_copy_source_and_grad_reads_do_not_count(tmp_path):
    tb = TraceBuilder()
    x, y, loss, _step, total = simple_step(tb)
    z = tb.array("z", requires_grad=True, line=4)
    grad_reader = tb.kernel("read_grad", line=140, g="r", out="w")
    tape = tb.tape()
    with tb.recording(tape):
        tb.copy(z, x, line=10)  # reads x: a copy adjoint does not need x's values
        tb.launch(grad_reader, g=tb.grad(x), out=y, line=11)
        tb.memset(x, line=12)
        tb.memset(tb.grad(x), line=13)
        tb.launch(total, y=y, loss=loss, line=14)
    tb.backward(tape, loss, line=15)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


DRIFT = """def drift(qd: wp.array(dtype=float), q: wp.array(dtype=float)):
    i = wp.tid()
    q[i] += DT * qd[i]
"""

SQUASH = """def squash(qd: wp.array(dtype=float), q: wp.array(dtype=float)):
    i = wp.tid()
    q[i] += DT * wp.tanh(qd[i])
"""


@pytest.mark.parametrize("source, expected", [(DRIFT, []), (SQUASH, [("WT101", 11, "warning")])])
def test_accumulation_after_a_linear_read_is_fine(tmp_path, source, expected):
    """`kick` accumulates into `qd` after `drift` read it: harmless when drift uses qd linearly."""
    tb = TraceBuilder()
    qd = tb.array("qd", requires_grad=True, line=1)
    q = tb.array("q", requires_grad=True, line=2)
    thrust = tb.array("thrust", requires_grad=True, line=3)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=4)
    reader = tb.kernel("drift", line=200, source=source, qd="r", q="a")
    kick = tb.kernel("kick", line=210, thrust="r", qd="a")
    total = tb.kernel("total", line=220, q="r", loss="a")
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(reader, qd=qd, q=q, line=10)
        tb.launch(kick, thrust=thrust, qd=qd, line=11)
        tb.launch(total, q=q, loss=loss, line=12)
    tb.backward(tape, loss, line=13)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == expected


@pytest.mark.parametrize(
    "body, linear",
    [
        ("q[i] += DT * qd[i]", True),
        ("q[i] = qd[i] - 2.0 * qd[i]", True),
        ("wp.atomic_add(q, 0, qd[i] * DT)", True),
        ("v = wp.vec2(qd[i], 0.0)\n    q[i] = v[0] + v[1]", True),
        ("q[i] = qd[i] * q[i]", False),
        ("q[i] = DT / qd[i]", False),
        ("q[i] = wp.sin(qd[i])", False),
        ("if qd[i] > 0.0:\n        q[i] = 1.0", False),
        ("q[int(qd[i])] = 1.0", False),
        ("helper(qd, i)", False),
        ("x = qd[i]\n    x *= x\n    q[i] = x", False),
        ("q[i] = 1.0", False),  # never read here: the read is elsewhere, assume the worst
    ],
)
def test_linearity_of_a_kernel_read(body, linear):
    from warptrace.kernel_source.linearity import adjoint_needs_value as _needs_value

    source = f"@wp.kernel\ndef k(qd: wp.array(dtype=float), q: wp.array(dtype=float)):\n    i = wp.tid()\n    {body}\n"
    assert _needs_value(source, "qd", ("qd", "q"), ("qd", "q")) is not linear


@pytest.mark.parametrize(
    "body, active, linear",
    [
        # a product with an array that has no gradient: the adjoint needs only that array
        ("q[i] = qd[i] * mask[i]", ("qd", "q"), True),
        ("q[i] = qd[i] * mask[i]", ("qd", "q", "mask"), False),
        # qd without a gradient of its own: squaring it feeds no gradient
        ("q[i] = qd[i] * qd[i]", ("q",), True),
        ("q[i] = qd[i] * qd[i]", ("q", "qd"), False),
        # tiles: load, transpose, FFT and store are linear maps
        (
            "t = wp.tile_load(qd, shape=(1, 4), offset=(i, 0))\n    wp.tile_fft(t)\n    wp.tile_store(q, t)",
            ("qd", "q"),
            True,
        ),
        ("t = wp.tile_load(qd, shape=(4, 4))\n    wp.tile_store(q, wp.tile_transpose(t))", ("qd", "q"), True),
        (
            "t = wp.tile_load(qd, shape=(4, 4))\n    wp.tile_store(q, wp.tile_map(wp.sin, t))",
            ("qd", "q"),
            False,
        ),
        # in place: stored back into the array it was loaded from
        ("t = wp.tile_load(qd, shape=(4, 4))\n    wp.tile_store(qd, t * 2.0)", ("qd", "q"), True),
        (
            "t = wp.tile_load(qd, shape=(4, 4))\n    wp.tile_store(qd, t, offset=(int(qd[0]), 0))",
            ("qd",),
            False,
        ),
        # tile_matmul: linear in its accumulator, bilinear in its factors
        (
            "a = wp.tile_load(q, shape=(4, 4))\n    c = wp.tile_load(qd, shape=(4, 4))\n"
            "    wp.tile_matmul(a, a, c, alpha=0.5, beta=-1.3)\n    wp.tile_store(qd, c)",
            ("qd", "q"),
            True,
        ),
        (
            "a = wp.tile_load(qd, shape=(4, 4))\n    b = wp.tile_load(q, shape=(4, 4))\n"
            "    c = wp.tile_zeros(shape=(4, 4), dtype=float)\n    wp.tile_matmul(a, b, c)\n    wp.tile_store(mask, c)",
            ("qd", "q"),
            False,
        ),
        (
            "a = wp.tile_load(qd, shape=(4, 4))\n    b = wp.tile_load(mask, shape=(4, 4))\n"
            "    wp.tile_store(q, wp.tile_matmul(a, b))",
            ("qd", "q"),
            True,
        ),
        (
            "a = wp.tile_load(qd, shape=(4, 4))\n    b = wp.tile_load(mask, shape=(4, 4))\n"
            "    wp.tile_store(q, wp.tile_matmul(a, b))",
            ("qd", "q", "mask"),
            False,
        ),
    ],
)
def test_linearity_depends_on_which_arrays_carry_gradients(body, active, linear):
    from warptrace.kernel_source.linearity import adjoint_needs_value as _needs_value

    source = (
        "@wp.kernel\ndef k(qd: wp.array(dtype=float), q: wp.array(dtype=float), mask: wp.array(dtype=float)):\n"
        f"    i = wp.tid()\n    {body}\n"
    )
    assert _needs_value(source, "qd", ("qd", "q", "mask"), active) is not linear


# ---------------------------------------------------------------- WT103
@pytest.mark.parametrize(
    "mutation, phrase",
    [
        ("untaped_launch", "outside the tape"),
        ("record_false", "record_tape=False"),
        ("memset", "outside the tape"),
        ("copy", "outside the tape"),
        ("cmd_launch", "never records"),
        ("native", "native"),
        ("other_tape", "different tape"),
        ("alias", "ptr=..."),
    ],
)
def test_unrecorded_mutation_before_backward(tmp_path, mutation, phrase):
    tb = TraceBuilder()
    x, y, loss, step, total = simple_step(tb)
    scale = tb.kernel("scale_inplace", line=150, x="rw")
    src = tb.array("src", line=5)
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(step, x=x, y=y, line=10)
        tb.launch(total, y=y, loss=loss, line=11)
        if mutation == "record_false":
            tb.launch(scale, x=x, record=False, line=20)
    if mutation == "untaped_launch":
        tb.launch(scale, x=x, line=20)
    elif mutation == "memset":
        tb.memset(x, value=2.0, line=20)
    elif mutation == "copy":
        tb.copy(x, src, line=20)
    elif mutation == "cmd_launch":
        tb.launch(scale, x=x, kind=S.CMD_LAUNCH, line=20)
    elif mutation == "native":
        tb.native(reads=[src], writes=[x], line=20)
    elif mutation == "other_tape":
        other = tb.tape()
        with tb.recording(other):
            tb.launch(step, x=src, y=x, line=20)
    elif mutation == "alias":
        alias = tb.alias(x, "positions", line=19)
        tb.launch(scale, x=alias, line=20)
    tb.backward(tape, loss, line=30)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT103", 20, "error")]
    finding = memory_findings(report)[0]
    assert phrase in finding.message
    assert finding.location.role == "mutation"


def test_mutation_of_memory_nobody_read_is_fine(tmp_path):
    tb = TraceBuilder()
    x, y, loss, step, total = simple_step(tb)
    other = tb.array("scratch", line=4)
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(step, x=x, y=y, line=10)
        tb.launch(total, y=y, loss=loss, line=11)
    tb.memset(other, line=12)
    tb.memset(loss, line=13)  # written (accumulated) by `total`, never read by a launch
    tb.backward(tape, loss, line=14)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


# ---------------------------------------------------------------- WT102 / WT104
def test_in_kernel_overwrite(tmp_path):
    tb = TraceBuilder()
    v = tb.array("v", requires_grad=True, line=1)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=2)
    limit = tb.kernel("limit_speed", line=100, v="rw")
    total = tb.kernel("total", line=110, v="r", loss="a")
    tape = tb.tape()
    with tb.recording(tape):
        for _ in range(3):
            tb.launch(limit, v=v, line=10)
        tb.launch(total, v=v, loss=loss, line=11)
    tb.backward(tape, loss, line=12)
    report = tb.analyze(tmp_path / "run.wtrace")
    # one root cause: the in-place kernel (its repeats are not also WT101)
    assert codes(report) == [("WT102", 10, "error")]
    finding = memory_findings(report)[0]
    assert finding.count == 3
    roles = {loc.role: loc.line for loc in finding.related}
    assert roles == {"store": 102, "read": 101, "backward": 12}


WRITE_THEN_READ = """def layer(x: wp.array(dtype=float), y: wp.array(dtype=float), z: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.tanh(x[i])
    h = y[i]
    z[i] = h * h
"""
READ_THEN_STORE_LATER = """def layer(x: wp.array(dtype=float), y: wp.array(dtype=float), z: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.tanh(x[i])
    h = y[i]
    y[i] = h * h
"""


@pytest.mark.parametrize(
    "source, expected", [(WRITE_THEN_READ, []), (READ_THEN_STORE_LATER, [("WT102", 10, "error")])]
)
def test_write_then_read_inside_a_kernel_is_fine(tmp_path, source, expected):
    tb = TraceBuilder()
    x = tb.array("x", requires_grad=True, line=1)
    y = tb.array("y", requires_grad=True, line=2)
    z = tb.array("z", requires_grad=True, line=3)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=4)
    layer = tb.kernel("layer", line=300, source=source, arg_lines={"y": (303, 302)}, x="r", y="rw", z="w")
    total = tb.kernel("total", line=310, z="r", loss="a")
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(layer, x=x, y=y, z=z, line=10)
        tb.launch(total, z=z, loss=loss, line=11)
    tb.backward(tape, loss, line=12)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == expected


def test_accumulate_in_kernel_is_exempt(tmp_path):
    tb = TraceBuilder()
    v = tb.array("v", requires_grad=True, line=1)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=2)
    accumulate = tb.kernel("add_gravity", line=100, v="ra")
    total = tb.kernel("total", line=110, v="r", loss="a")
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(accumulate, v=v, line=10)
        tb.launch(total, v=v, loss=loss, line=11)
    tb.backward(tape, loss, line=12)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


def test_in_kernel_overwrite_without_backward_is_fine(tmp_path):
    tb = TraceBuilder()
    v = tb.array("v", requires_grad=True, line=1)
    limit = tb.kernel("limit_speed", line=100, v="rw")
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(limit, v=v, line=10)
    tb.launch(limit, v=v, line=11)  # untaped, and no backward anyway
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


def test_struct_field_in_place_is_wt104_with_field_path(tmp_path):
    tb = TraceBuilder()
    q = tb.array("state.q", requires_grad=True, line=1)
    v = tb.array("state.v", requires_grad=True, line=2)
    k = tb.array("k", requires_grad=True, line=3)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=4)
    step = tb.kernel("step", line=100, state__q="rw", state__v="r", k="r")
    total = tb.kernel("total", line=110, state__q="r", loss="a")
    tape = tb.tape()
    with tb.recording(tape):
        for _ in range(4):
            tb.launch(step, state__q=q, state__v=v, k=k, line=10)
        tb.launch(total, state__q=q, loss=loss, line=11)
    tb.backward(tape, loss, line=12)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT104", 10, "error")]
    assert "`state.q`" in memory_findings(report)[0].message
    assert memory_findings(report)[0].evidence["field"] == "state.q"
    assert memory_findings(report)[0].count == 4


def test_struct_field_overwrite_across_launches_is_wt104(tmp_path):
    tb = TraceBuilder()
    q = tb.array("q", requires_grad=True, line=1)
    out = tb.array("out", requires_grad=True, line=2)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=3)
    reader = tb.kernel("energy", line=100, model__q="r", out="w")
    writer = tb.kernel("project", line=110, model__q="w")
    total = tb.kernel("total", line=120, out="r", loss="a")
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(reader, model__q=q, out=out, line=10)
        tb.launch(writer, model__q=q, line=11)
        tb.launch(total, out=out, loss=loss, line=12)
    tb.backward(tape, loss, line=13)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT104", 11, "error")]
    assert "`model.q`" in memory_findings(report)[0].message


def test_uncertain_kernel_is_only_a_warning(tmp_path):
    tb = TraceBuilder()
    x, y, loss, step, total = simple_step(tb)
    opaque = tb.kernel("opaque", line=160)
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(step, x=x, y=y, line=10)
        tb.launch(opaque, x=x, uncertain=True, line=11)
        tb.launch(total, y=y, loss=loss, line=12)
    tb.backward(tape, loss, line=13)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT101", 11, "warning")]
    assert "conservative" in memory_findings(report)[0].message


# ---------------------------------------------------------------- WT105
def test_work_after_loss(tmp_path):
    tb = TraceBuilder()
    x, y, loss, step, total = simple_step(tb)
    metric = tb.array("metric", line=4)
    log = tb.kernel("log_metrics", line=170, y="r", metric="w")
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(step, x=x, y=y, line=10)
        tb.launch(total, y=y, loss=loss, line=11)
        tb.launch(log, y=y, metric=metric, line=12)
    tb.backward(tape, loss, line=13)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT105", 12, "warning")]
    roles = {loc.role: loc.line for loc in memory_findings(report)[0].related}
    assert roles == {"loss final": 11, "backward": 13}


def test_work_after_loss_with_grads_keys(tmp_path):
    tb = TraceBuilder()
    x, y, _loss, step, _total = simple_step(tb)
    metric = tb.array("metric", line=4)
    log = tb.kernel("log_metrics", line=170, x="r", metric="w")
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(step, x=x, y=y, line=10)
        tb.launch(log, x=x, metric=metric, line=12)
    tb.backward(tape, grads=[y], line=13)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == [("WT105", 12, "warning")]


def test_post_loss_overwrite_is_one_wt105_error(tmp_path):
    """A state reset inside `with tape:` after the loss: WT105 (as an error), not also WT101."""
    tb = TraceBuilder()
    x, y, loss, step, total = simple_step(tb)
    spawn = tb.array("spawn", line=5)
    reset = tb.kernel("reset_state", line=180, spawn="r", x="w")
    for _ in range(3):
        tape = tb.tape()
        with tb.recording(tape):
            tb.launch(step, x=x, y=y, line=10)
            tb.launch(total, y=y, loss=loss, line=11)
            tb.launch(reset, spawn=spawn, x=x, line=12)
        tb.backward(tape, loss, line=13)
        tb.memset(loss, line=14)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT105", 12, "error")]
    finding = memory_findings(report)[0]
    assert finding.count == 3
    assert "overwrites `x`" in finding.message and "`step`" in finding.message
    assert {loc.role for loc in finding.related} == {"read", "allocation", "loss final", "backward"}


# ---------------------------------------------------------------- scale
def spring_ping_pong(tb: TraceBuilder, steps: int) -> None:
    """``steps`` iterations of spring_force (overwrites force) and integrate (ping-pongs two
    states) on one tape: 2 * steps + 1 launches. Also timed by ``tools/bench_analyze.py --rule-cases``."""
    k = tb.array("k", requires_grad=True, line=1)
    force = tb.array("force", requires_grad=True, line=2)
    states = [tb.array("state", requires_grad=True, line=3) for _ in range(2)]
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=4)
    spring = tb.kernel("spring_force", line=100, q="r", k="r", force="w")
    integrate = tb.kernel("integrate", line=110, q="r", force="r", q_next="w")
    total = tb.kernel("total", line=120, q="r", loss="a")
    tape = tb.tape()
    with tb.recording(tape):
        for i in range(steps):
            tb.launch(spring, q=states[i % 2], k=k, force=force, line=10)
            tb.launch(integrate, q=states[i % 2], force=force, q_next=states[(i + 1) % 2], line=11)
        tb.launch(total, q=states[0], loss=loss, line=12)
    tb.backward(tape, loss, line=13, adjoints=False)


def test_scale_100k_launches(tmp_path):
    """Counts stay exact at 100k launches; the time is measured by ``tools/bench_analyze.py --rule-cases``."""
    tb = TraceBuilder()
    steps = 50_000
    spring_ping_pong(tb, steps)
    path = tb.write(tmp_path / "run.wtrace")
    from warptrace.analysis.findings import merge_findings
    from warptrace.analysis.model import Model
    from warptrace.analysis.rules import ALL_RULES
    from warptrace.trace.reader import read_trace

    model = Model(read_trace(path))
    findings = merge_findings(
        [f for rule in ALL_RULES if rule.codes[0].startswith("WT1") for f in rule.check(model)]
    )
    by_line = {(f.code, f.location.line): f.count for f in findings}
    assert by_line[("WT101", 10)] == steps - 1  # spring_force overwrites force read by integrate
    assert by_line[("WT101", 11)] >= steps - 2  # integrate ping-pongs the two states


# ---------------------------------------------------------------- reports
def test_text_report_of_clean_trace_is_one_line(tmp_path):
    tb = TraceBuilder()
    x, y, loss, step, total = simple_step(tb)
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(step, x=x, y=y, line=10)
        tb.launch(total, y=y, loss=loss, line=11)
    tb.backward(tape, loss, line=12)
    report = tb.analyze(tmp_path / "run.wtrace")
    text = text_report.render(report)
    checked = ", ".join(report.families_checked)
    assert len(text.splitlines()) == 1
    assert text.startswith(f"no known gradient bug pattern found (checked: {checked}); measure the gradient")
    assert "python -m warptrace gradcheck" in text
    assert "memory" in report.families_checked


def test_text_report_of_incomplete_trace_says_so(tmp_path):
    tb = TraceBuilder()
    x, y, loss, step, total = simple_step(tb)
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(step, x=x, y=y, line=10)
        tb.memset(x, line=11)
        tb.launch(total, y=y, loss=loss, line=12)
    tb.backward(tape, loss, line=13)
    from warptrace.analysis.report import analyze_trace
    from warptrace.trace.reader import read_trace

    report = analyze_trace(read_trace(tb.write(tmp_path / "run.wtrace", complete=False)))
    text = text_report.render(report)
    assert "incomplete" in text
    assert "error WT101 overwrite-after-read" in text
    assert "change      train.py:11  x.zero_()" in text  # relative to the recorded cwd
    assert text.startswith("warptrace: 1 error in ")
    assert "occurred once" in text
    data = json.loads(json_report.render(report))
    assert data["complete"] is False
    assert data["schema"] == 1
    assert data["summary"] == {"error": 1, "warning": 0, "info": 0}
    assert data["findings"][0]["location"]["file"] == "/home/user/project/train.py"
    assert set(data) == {
        "warptrace_version", "schema", "trace", "complete", "warp_version", "cwd",
        "families_checked", "counts", "summary", "findings",
    }  # fmt: skip


def test_severity_order_and_rule_info_registered():
    from warptrace.analysis.rules import ALL_RULES, RULE_INFO, overwrite_after_read

    assert overwrite_after_read.RULE in ALL_RULES
    for code in ("WT101", "WT102", "WT103", "WT104", "WT105"):
        info = RULE_INFO[code]
        assert info.family == "memory" and info.fix and info.doc.startswith("Differentiability")
    assert Severity.ERROR > Severity.WARNING
