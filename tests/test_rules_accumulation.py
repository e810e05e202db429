"""WT201-WT205 on synthetic traces: duplicates, retain_grad double counting, unzeroed grads, kept tapes,
a torch leaf's .grad written by Warp and torch."""

from __future__ import annotations

import json

from tests.tracebuilder import TraceBuilder
from warptrace.analysis.rules import RULE_INFO
from warptrace.trace import schema as S

ACCUMULATION = {code for code, info in RULE_INFO.items() if info.family == "accumulation"}


def codes(report) -> list[tuple[str, int, str]]:
    """(code, line, severity) of the accumulation findings."""
    return sorted(
        (f.code, f.location.line, f.severity.label) for f in report.findings if f.code in ACCUMULATION
    )


def layer(tb: TraceBuilder, *, retain: bool = False):
    """x (data), w (parameter), y = f(x, w) (optionally retain_grad), loss += g(y)."""
    x = tb.array("x", line=1)
    w = tb.array("w", requires_grad=True, line=2)
    y = tb.array("y", requires_grad=True, retain_grad=retain, line=3)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=4)
    scale = tb.kernel("scale", line=100, x="r", w="r", y="w")
    total = tb.kernel("total", line=110, y="r", loss="a")
    return x, w, y, loss, scale, total


def set_retain(tb: TraceBuilder, array: int, value: bool, line: int) -> None:
    tb.event(S.SET_RETAIN_GRAD, array_id=array, value=float(value), site=tb.site(line))


# ---------------------------------------------------------------- WT201
def test_duplicate_over_retained_output_is_an_error_at_the_second_launch(tmp_path):
    tb = TraceBuilder()
    x, w, y, loss, scale, total = layer(tb, retain=True)
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(scale, x=x, w=w, y=y, line=20)
        tb.launch(scale, x=x, w=w, y=y, line=21)
        tb.launch(total, y=y, loss=loss, line=22)
    tb.backward(tape, loss, line=23)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT201", 21, "error")]
    finding = report.by_code("WT201")[0]
    assert "`scale`" in finding.message and "`y`" in finding.message and "retain_grad" in finding.message
    assert {loc.role: loc.line for loc in finding.related} == {"first launch": 20, "backward": 23}
    assert finding.location.role == "duplicate launch"


def test_bare_duplicate_is_info_on_modern_warp_and_error_before_1_13(tmp_path):
    for version, severity in (("1.19.0", "info"), ("1.12.1", "error")):
        tb = TraceBuilder(warp_version=version)
        x, w, y, loss, scale, total = layer(tb)
        tape = tb.tape()
        with tb.recording(tape):
            tb.launch(scale, x=x, w=w, y=y, line=20)
            tb.launch(scale, x=x, w=w, y=y, line=21)
            tb.launch(total, y=y, loss=loss, line=22)
        tb.backward(tape, loss, line=23)
        report = tb.analyze(tmp_path / f"run-{version}.wtrace")
        assert codes(report) == [("WT201", 21, severity)], version


def test_retain_grad_set_by_event_before_the_backward_counts(tmp_path):
    tb = TraceBuilder()
    x, w, y, loss, scale, total = layer(tb)
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(scale, x=x, w=w, y=y, line=20)
        tb.launch(scale, x=x, w=w, y=y, line=21)
        tb.launch(total, y=y, loss=loss, line=22)
    set_retain(tb, y, True, line=23)
    tb.backward(tape, loss, line=24)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == [("WT201", 21, "error")]


def test_duplicate_on_a_tape_never_backpropagated_is_info(tmp_path):
    tb = TraceBuilder()
    x, w, y, _loss, scale, _total = layer(tb, retain=True)
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(scale, x=x, w=w, y=y, line=20)
        tb.launch(scale, x=x, w=w, y=y, line=21)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == [("WT201", 21, "info")]


def test_time_loop_on_new_memory_is_not_a_duplicate(tmp_path):
    tb = TraceBuilder()
    w = tb.array("w", requires_grad=True, line=1)
    states = [tb.array("states", requires_grad=True, retain_grad=True, line=2) for _ in range(6)]
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=3)
    step = tb.kernel("step", line=100, q="r", w="r", q_next="w")
    total = tb.kernel("total", line=110, q="r", loss="a")
    tape = tb.tape()
    with tb.recording(tape):
        for t in range(5):
            tb.launch(step, q=states[t], w=w, q_next=states[t + 1], line=20)
        tb.launch(total, q=states[-1], loss=loss, line=21)
    tb.backward(tape, loss, line=22)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


def test_relaunch_after_inputs_were_rewritten_is_not_a_duplicate(tmp_path):
    tb = TraceBuilder()
    x, w, y, loss, scale, total = layer(tb, retain=True)
    fresh = tb.array("fresh", line=5)
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(scale, x=x, w=w, y=y, line=20)
        tb.launch(total, y=y, loss=loss, line=21)
    tb.copy(x, fresh, line=22)  # new data in x between the two launches (untaped)
    with tb.recording(tape):
        tb.launch(scale, x=x, w=w, y=y, line=23)
    assert [c for c in codes(tb.analyze(tmp_path / "run.wtrace")) if c[0] == "WT201"] == []


def test_accumulating_and_in_place_kernels_are_time_steps_not_duplicates(tmp_path):
    tb = TraceBuilder()
    thrust = tb.array("thrust", requires_grad=True, line=1)
    qd = tb.array("qd", requires_grad=True, retain_grad=True, line=2)
    q = tb.array("q", requires_grad=True, line=3)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=4)
    kick = tb.kernel("kick", line=100, thrust="r", qd="a")
    damp = tb.kernel("damp", line=110, q="rw")
    total = tb.kernel("total", line=120, qd="r", q="r", loss="a")
    tape = tb.tape()
    with tb.recording(tape):
        for _ in range(3):
            tb.launch(kick, thrust=thrust, qd=qd, line=20)
            tb.launch(damp, q=q, line=21)
        tb.launch(total, qd=qd, q=q, loss=loss, line=22)
    tb.backward(tape, loss, line=23)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


def test_duplicates_inside_a_loop_are_one_finding_with_a_count(tmp_path):
    tb = TraceBuilder()
    x, w, y, loss, scale, total = layer(tb, retain=True)
    for _ in range(4):
        tape = tb.tape()
        with tb.recording(tape):
            tb.launch(scale, x=x, w=w, y=y, line=20)
            tb.launch(scale, x=x, w=w, y=y, line=20)  # a helper called twice: the same line
            tb.launch(total, y=y, loss=loss, line=21)
        tb.backward(tape, loss, line=22)
        tb.zero(tape, line=23)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT201", 20, "error")]
    finding = report.by_code("WT201")[0]
    assert finding.count == 4
    assert "same call, reached twice" in finding.message


def test_reset_between_the_launches_ends_the_recording(tmp_path):
    tb = TraceBuilder()
    x, w, y, loss, scale, total = layer(tb, retain=True)
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(scale, x=x, w=w, y=y, line=20)
    tb.reset(tape, line=21)
    with tb.recording(tape):
        tb.launch(scale, x=x, w=w, y=y, line=22)
        tb.launch(total, y=y, loss=loss, line=23)
    tb.backward(tape, loss, line=24)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


def test_different_launch_dimensions_are_not_duplicates(tmp_path):
    tb = TraceBuilder()
    x, w, y, loss, scale, total = layer(tb, retain=True)
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(scale, x=x, w=w, y=y, line=20, dim="2")
        tb.launch(scale, x=x, w=w, y=y, line=21, dim="4")
        tb.launch(total, y=y, loss=loss, line=22)
    tb.backward(tape, loss, line=23)
    assert [c for c in codes(tb.analyze(tmp_path / "run.wtrace")) if c[0] == "WT201"] == []


# ---------------------------------------------------------------- WT202
def test_retained_array_overwritten_by_a_second_launch(tmp_path):
    tb = TraceBuilder()
    anchor = tb.array("anchor", line=1)
    w = tb.array("w", requires_grad=True, line=2)
    pos = tb.array("pos", requires_grad=True, retain_grad=True, line=3)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=4)
    guess = tb.kernel("initial_guess", line=100, anchor="r", w="r", pos="w")
    solve = tb.kernel("solve", line=110, anchor="r", w="r", pos="w")
    total = tb.kernel("potential", line=120, pos="r", loss="a")
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(guess, anchor=anchor, w=w, pos=pos, line=20)
        tb.launch(solve, anchor=anchor, w=w, pos=pos, line=21)
        tb.launch(total, pos=pos, loss=loss, line=22)
    tb.backward(tape, loss, line=23)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT202", 21, "error")]
    finding = report.by_code("WT202")[0]
    assert (
        "`pos`" in finding.message and "`initial_guess`" in finding.message and "`solve`" in finding.message
    )
    assert {loc.role: loc.line for loc in finding.related} == {"first write": 20, "backward": 23}


def test_disjoint_slices_of_a_retained_buffer_are_written_once_each(tmp_path):
    tb = TraceBuilder()
    w = tb.array("w", requires_grad=True, line=1)
    xa, xb = tb.array("xa", line=2), tb.array("xb", line=3)
    feat = tb.array("feat", shape=(8,), requires_grad=True, retain_grad=True, line=4)
    lo = tb.view(feat, offset=0, shape=(4,), label="feat_lo", line=5)
    hi = tb.view(feat, offset=4, shape=(4,), label="feat_hi", line=6)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=7)
    embed = tb.kernel("embed", line=100, x="r", w="r", feat="w")
    energy = tb.kernel("energy", line=110, feat="r", loss="a")
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(embed, x=xa, w=w, feat=lo, line=20)
        tb.launch(embed, x=xb, w=w, feat=hi, line=21)
        tb.launch(energy, feat=feat, loss=loss, line=22)
    tb.backward(tape, loss, line=23)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


def test_accumulating_second_write_or_a_constant_first_write_is_fine(tmp_path):
    tb = TraceBuilder()
    w = tb.array("w", requires_grad=True, line=1)
    c = tb.array("c", line=2)
    pos = tb.array("pos", requires_grad=True, retain_grad=True, line=3)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=4)
    base = tb.kernel("base", line=100, w="r", pos="w")
    add = tb.kernel("add", line=110, w="r", pos="a")
    init = tb.kernel("init", line=120, c="r", pos="w")
    total = tb.kernel("total", line=130, pos="r", loss="a")
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(base, w=w, pos=pos, line=20)
        tb.launch(add, w=w, pos=pos, line=21)  # += keeps the first write alive: both adjoints are right
        tb.launch(total, pos=pos, loss=loss, line=22)
    tb.backward(tape, loss, line=23)
    tape2 = tb.tape()
    with tb.recording(tape2):
        tb.launch(init, c=c, pos=pos, line=30)  # its adjoint passes gradient to nothing
        tb.launch(base, w=w, pos=pos, line=31)
        tb.launch(total, pos=pos, loss=loss, line=32)
    tb.backward(tape2, loss, line=33)
    assert [c for c in codes(tb.analyze(tmp_path / "run.wtrace")) if c[0] == "WT202"] == []


def test_a_duplicate_launch_is_reported_once_as_wt201_not_wt202(tmp_path):
    tb = TraceBuilder()
    x, w, y, loss, scale, total = layer(tb, retain=True)
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(scale, x=x, w=w, y=y, line=20)
        tb.launch(scale, x=x, w=w, y=y, line=21)
        tb.launch(total, y=y, loss=loss, line=22)
    tb.backward(tape, loss, line=23)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == [("WT201", 21, "error")]


STORE_TWICE = """@wp.kernel
def limit_speed(v: wp.array(dtype=float), w: wp.array(dtype=float), speed: wp.array(dtype=float)):
    i = wp.tid()
    s = v[i] * w[i]
    speed[i] = s
    if s > 1.0:
        speed[i] = 1.0
"""

STORE_ONCE = """@wp.kernel
def limit_speed(v: wp.array(dtype=float), w: wp.array(dtype=float), speed: wp.array(dtype=float)):
    i = wp.tid()
    s = v[i] * w[i]
    if s > 1.0:
        s = 1.0
    speed[i] = s
"""

STORE_MOVING_INDEX = """@wp.kernel
def spread(v: wp.array(dtype=float), w: wp.array(dtype=float), speed: wp.array(dtype=float)):
    i = wp.tid()
    j = 2 * i
    speed[j] = v[i] * w[i]
    j = j + 1
    speed[j] = v[i] * w[i]
"""

STORE_IN_LOOP = """@wp.kernel
def relax(v: wp.array(dtype=float), w: wp.array(dtype=float), speed: wp.array(dtype=float)):
    i = wp.tid()
    for k in range(3):
        speed[i] = v[i] * w[i] * float(k)
"""


def store_twice_trace(tb: TraceBuilder, source: str, *, retain: bool = True):
    v = tb.array("v", line=1)
    w = tb.array("w", requires_grad=True, line=2)
    speed = tb.array("speed", requires_grad=True, retain_grad=retain, line=3)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=4)
    limit = tb.kernel("limit_speed", line=101, source=source, v="r", w="r", speed="w")
    total = tb.kernel("kinetic", line=120, speed="r", loss="a")
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(limit, v=v, w=w, speed=speed, line=20)
        tb.launch(total, speed=speed, loss=loss, line=21)
    tb.backward(tape, loss, line=22)


def test_kernel_storing_an_element_twice_into_a_retained_array(tmp_path):
    tb = TraceBuilder()
    store_twice_trace(tb, STORE_TWICE)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT202", 20, "error")]
    finding = report.by_code("WT202")[0]
    stores = [loc for loc in finding.related if loc.role == "store"]
    # the kernel's def is at line 101, so the stores sit at 104 and 106
    assert [loc.line for loc in stores] == [104, 106]
    assert stores[1].text == "speed[i] = 1.0"


def test_store_once_index_moving_or_no_retain_is_fine(tmp_path):
    for name, source, retain in (
        ("once", STORE_ONCE, True),
        ("moving", STORE_MOVING_INDEX, True),
        ("no-retain", STORE_TWICE, False),
    ):
        tb = TraceBuilder()
        store_twice_trace(tb, source, retain=retain)
        assert codes(tb.analyze(tmp_path / f"{name}.wtrace")) == [], name


def test_a_loop_storing_the_same_element_every_iteration(tmp_path):
    tb = TraceBuilder()
    store_twice_trace(tb, STORE_IN_LOOP)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == [("WT202", 20, "error")]


# ---------------------------------------------------------------- WT203
def training_loop(tb: TraceBuilder, iters: int, *, zero: str = "", read: bool = True, update: bool = True):
    """forward on a fresh tape, backward, read w.grad, untaped sgd(w, w.grad), optional zeroing."""
    x = tb.array("x", line=1)
    w = tb.array("w", requires_grad=True, line=2)
    pred = tb.array("pred", requires_grad=True, line=3)
    predict = tb.kernel("predict", line=100, x="r", w="r", pred="w")
    mse = tb.kernel("mse", line=110, pred="r", loss="a")
    sgd = tb.kernel("sgd", line=120, w="rw", grad="r")
    for _ in range(iters):
        loss = tb.array("loss", shape=(1,), requires_grad=True, line=10)
        tape = tb.tape(line=11)
        with tb.recording(tape):
            tb.launch(predict, x=x, w=w, pred=pred, line=12)
            tb.launch(mse, pred=pred, loss=loss, line=13)
        tb.backward(tape, loss, line=14)
        if read:
            tb.value_read(tb.grad(w), line=15)
        if update:
            tb.launch(sgd, w=w, grad=tb.grad(w), line=16)
        if zero == "tape":
            tb.zero(tape, line=17)
        elif zero == "memset":
            tb.memset(tb.grad(w), 0.0, line=17)
    return w


def test_training_loop_without_zeroing(tmp_path):
    tb = TraceBuilder()
    training_loop(tb, 4)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT203", 14, "error")]
    finding = report.by_code("WT203")[0]
    assert finding.count == 3
    assert "`w.grad`" in finding.message and "`w`" in finding.message
    assert {loc.role: loc.line for loc in finding.related} == {
        "previous backward": 14,
        "parameter update": 16,
    }


def test_zeroing_by_tape_zero_or_memset_is_fine(tmp_path):
    for zero in ("tape", "memset"):
        tb = TraceBuilder()
        training_loop(tb, 4, zero=zero)
        assert codes(tb.analyze(tmp_path / f"{zero}.wtrace")) == [], zero


def test_tape_zero_on_a_fresh_tape_zeroes_nothing(tmp_path):
    tb = TraceBuilder()
    x = tb.array("x", line=1)
    w = tb.array("w", requires_grad=True, line=2)
    predict = tb.kernel("predict", line=100, x="r", w="r", loss="a")
    sgd = tb.kernel("sgd", line=120, w="rw", grad="r")
    for _ in range(3):
        loss = tb.array("loss", shape=(1,), requires_grad=True, line=10)
        tape = tb.tape(line=11)
        tb.zero(tape, line=12)  # before anything was recorded: knows no gradients
        with tb.recording(tape):
            tb.launch(predict, x=x, w=w, loss=loss, line=13)
        tb.backward(tape, loss, line=14)
        tb.launch(sgd, w=w, grad=tb.grad(w), line=15)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == [("WT203", 14, "error")]


def test_micro_batches_accumulate_with_unchanged_parameters(tmp_path):
    tb = TraceBuilder()
    x = tb.array("x", line=1)
    w = tb.array("w", requires_grad=True, line=2)
    predict = tb.kernel("predict", line=100, x="r", w="r", loss="a")
    sgd = tb.kernel("sgd", line=120, w="rw", grad="r")
    for _ in range(3):
        tapes = []
        for _ in range(4):
            loss = tb.array("loss", shape=(1,), requires_grad=True, line=10)
            tape = tb.tape(line=11)
            with tb.recording(tape):
                tb.launch(predict, x=x, w=w, loss=loss, line=12)
            tb.backward(tape, loss, line=13)
            tapes.append(tape)
        tb.launch(sgd, w=w, grad=tb.grad(w), line=14)
        for tape in tapes:
            tb.zero(tape, line=15)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


def test_accumulated_gradient_nobody_reads_is_harmless(tmp_path):
    tb = TraceBuilder()
    x = tb.array("x", line=1)
    w = tb.array("w", requires_grad=True, line=2)
    state = tb.array("state", requires_grad=True, line=3)
    init = tb.array("init", line=4)
    step = tb.kernel("step", line=100, state="r", w="r", loss="a")
    sgd = tb.kernel("sgd", line=120, w="rw", grad="r")
    for _ in range(3):
        tb.copy(state, init, line=9)  # reset the state (its grad accumulates, never read)
        loss = tb.array("loss", shape=(1,), requires_grad=True, line=10)
        tape = tb.tape(line=11)
        with tb.recording(tape):
            tb.launch(step, state=state, w=w, loss=loss, line=12)
        tb.backward(tape, loss, line=13)
        tb.launch(sgd, w=w, grad=tb.grad(w), line=14)
        tb.zero(tape, line=15)
    del x
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


def test_fresh_grad_array_each_iteration_is_fine(tmp_path):
    tb = TraceBuilder()
    x = tb.array("x", line=1)
    w = tb.array("w", requires_grad=False, line=2)
    predict = tb.kernel("predict", line=100, x="r", w="r", loss="a")
    sgd = tb.kernel("sgd", line=120, w="rw", grad="r")
    for _ in range(3):
        fresh = tb.array("g", line=9)
        tb.event(S.SET_GRAD, array_id=w, ref_id=fresh, site=tb.site(9))
        tb._grad[w] = fresh  # the builder's own view of w.grad
        tb._arrays[fresh]["grad_of"] = w
        loss = tb.array("loss", shape=(1,), requires_grad=True, line=10)
        tape = tb.tape(line=11)
        with tb.recording(tape):
            tb.launch(predict, x=x, w=w, loss=loss, line=12)
        tb.backward(tape, loss, line=13)
        tb.launch(sgd, w=w, grad=fresh, line=14)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


# ---------------------------------------------------------------- scale
def test_a_long_training_loop_is_clean(tmp_path):
    """The time is measured by ``tools/bench_analyze.py --rule-cases``."""
    tb = TraceBuilder()
    training_loop(tb, 3000, zero="tape")
    path = tb.write(tmp_path / "run.wtrace")
    from warptrace.analysis.model import Model
    from warptrace.analysis.rules import ALL_RULES
    from warptrace.trace.reader import read_trace

    model = Model(read_trace(path))
    assert [f for rule in ALL_RULES if rule.codes[0].startswith("WT2") for f in rule.check(model)] == []


def test_copy_adjoint_read_modify_write_counts_as_accumulation(tmp_path):
    """Warp >= 1.17 runs a copy's adjoint as a launch computing ``src.grad = src.grad + dest.grad``."""
    tb = TraceBuilder()
    x = tb.array("x", line=1)
    w = tb.array("w", requires_grad=True, line=2)
    add = tb.kernel("map_kernel", line=100, a_array="r", b_array="r", __out_0="w")
    predict = tb.kernel("predict", line=110, x="r", wc="r", loss="a")
    adam = tb.kernel("adam_step", line=120, g="r", params="rw")
    for _ in range(3):
        loss = tb.array("loss", shape=(1,), requires_grad=True, line=10)
        tape = tb.tape(line=11)
        wc = tb.array("wc", requires_grad=True, line=12)
        with tb.recording(tape):
            tb.copy(wc, w, line=12)
            tb.launch(predict, x=x, wc=wc, loss=loss, line=13)
        site = tb.site(14)
        tb.event(S.BACKWARD_BEGIN, tape=tape, phase=S.BACKWARD, site=site, array_id=loss)
        tb.phase = S.BACKWARD
        seed = tb.event(S.MEMSET, tape=tape, phase=S.BACKWARD, site=site, value=1.0, array_id=tb.grad(loss))
        tb.access(seed, tb.grad(loss), S.ROLE_WRITE, S.FLAG_STORE)
        for launch in reversed(tb._tape_launches[tape]):
            tb._adjoint(tape, launch, site)
        # the recorded copy's adjoint: w.grad = w.grad + wc.grad, a plain launch inside the backward
        tb.launch(add, a_array=tb.grad(w), b_array=tb.grad(wc), __out_0=tb.grad(w), site=site)
        tb.phase = S.FORWARD
        tb.event(S.BACKWARD_END, tape=tape, phase=S.BACKWARD, site=site)
        tb.launch(adam, g=tb.grad(w), params=w, line=15)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT203", 14, "error")]
    assert report.by_code("WT203")[0].count == 2


# ---------------------------------------------------------------- WT204
def kept_tape_loop(tb: TraceBuilder, *, reset: bool, iterations: int = 3) -> None:
    """A training loop that keeps one tape: loss zeroed, forward recorded, backward, zero()."""
    x, w, y, loss, scale, total = layer(tb)
    tape = tb.tape(line=10)
    for _ in range(iterations):
        tb.memset(loss, line=11)
        with tb.recording(tape):
            tb.launch(scale, x=x, w=w, y=y, line=20)
            tb.launch(total, y=y, loss=loss, line=21)
        tb.backward(tape, loss, line=23)
        tb.zero(tape, line=24)
        if reset:
            tb.reset(tape, line=25)


def test_a_tape_kept_across_iterations_replays_the_earlier_recordings(tmp_path):
    tb = TraceBuilder()
    kept_tape_loop(tb, reset=False)
    report = tb.analyze(tmp_path / "run.wtrace")
    # (and WT201 info: with w never updated, the kept tape holds `scale` twice over unchanged inputs)
    assert codes(report) == [("WT201", 20, "info"), ("WT204", 23, "error")]
    finding = report.by_code("WT204")[0]
    assert finding.count == 2  # the second and third backward replay earlier recordings
    assert "`total`" in finding.message and "`loss`" in finding.message and "tape.reset()" in finding.message
    assert {loc.role: loc.line for loc in finding.related} == {
        "earlier recording": 21,
        "recorded again": 21,
        "earlier backward": 23,
    }


def test_a_tape_reset_each_iteration_is_silent(tmp_path):
    tb = TraceBuilder()
    kept_tape_loop(tb, reset=True)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


def test_backward_calls_over_one_recording_are_silent(tmp_path):
    """Jacobian rows: one recording, a backward per seed, nothing recorded between them."""
    tb = TraceBuilder()
    x, w, y, loss, scale, total = layer(tb)
    tape = tb.tape(line=10)
    with tb.recording(tape):
        tb.launch(scale, x=x, w=w, y=y, line=20)
        tb.launch(total, y=y, loss=loss, line=21)
    for line in (23, 25):
        tb.backward(tape, loss, line=line)
        tb.zero(tape, line=line + 1)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


def test_a_second_stage_writing_its_own_memory_is_silent(tmp_path):
    """A stage recorded after the first backward that accumulates into a loss of its own."""
    tb = TraceBuilder()
    x, w, y, loss, scale, total = layer(tb)
    loss2 = tb.array("loss2", shape=(1,), requires_grad=True, line=5)
    tape = tb.tape(line=10)
    with tb.recording(tape):
        tb.launch(scale, x=x, w=w, y=y, line=20)
        tb.launch(total, y=y, loss=loss, line=21)
    tb.backward(tape, loss, line=23)
    tb.zero(tape, line=24)
    with tb.recording(tape):
        tb.launch(total, y=y, loss=loss2, line=26)
    tb.backward(tape, loss2, line=27)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


def test_a_kept_tape_whose_replayed_launch_reads_no_gradient_is_silent(tmp_path):
    """Replaying a launch that reads only constants adds no gradient anywhere."""
    tb = TraceBuilder()
    x = tb.array("x", line=1)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=4)
    total = tb.kernel("total", line=110, x="r", loss="a")
    tape = tb.tape(line=10)
    for _ in range(3):
        tb.memset(loss, line=11)
        with tb.recording(tape):
            tb.launch(total, x=x, loss=loss, line=21)
        tb.backward(tape, loss, line=23)
        tb.zero(tape, line=24)
    assert [c for c in codes(tb.analyze(tmp_path / "run.wtrace")) if c[0] == "WT204"] == []


# ---------------------------------------------------------------- WT205
def torch_leaf_function(
    tb: TraceBuilder, *, hand_back: bool = True, zero_after: bool = False, same_grad: bool = True,
    accumulate: bool = True,
):  # fmt: skip
    """An autograd Function's Warp side on traces alone: ``ctx.x = wp.from_torch(x)`` of a leaf
    (its grad is the leaf's .grad), a taped launch, a backward whose adjoint writes x's grad,
    ``wp.to_torch(ctx.x.grad)`` handed back, then torch's autograd accumulating into the leaf."""
    x = tb.array("ctx.x", requires_grad=True, kind=S.ARRAY_EXTERNAL, line=30)
    y = tb.array("ctx.y", requires_grad=True, line=31)
    square = tb.kernel("square", line=100, x="r", y="w")
    facts = {"framework": "torch", "direction": S.BRIDGE_IMPORT, "tensor": 0, "version": 0}
    imported = tb.event(
        S.BRIDGE,
        site=tb.site(30),
        array_id=x,
        detail=json.dumps({**facts, "grad_tensor": 1, "grad_version": 0, "leaf": True}),
    )
    tb.access(imported, x, S.ROLE_NONE)
    tb.access(imported, tb.grad(x), S.ROLE_NONE)
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(square, x=x, y=y, line=33)
    tb.memset(tb.grad(y), 1.0, line=40)
    tb.backward(tape, line=41)
    if hand_back:
        export = tb.event(
            S.BRIDGE,
            site=tb.site(42),
            array_id=tb.grad(x),
            detail=json.dumps({"framework": "torch", "direction": S.BRIDGE_EXPORT}),
        )
        tb.access(export, tb.grad(x), S.ROLE_READ)
    if zero_after:
        tb.memset(tb.grad(x), 0.0, line=43)
    if accumulate:
        detail = {
            "framework": "torch",
            "direction": S.BRIDGE_ACCUMULATE,
            "tensor": 0,
            "grad_tensor": 1 if same_grad else 7,
        }
        tb.event(S.BRIDGE, site=tb.site(50), detail=json.dumps(detail))


def test_a_torch_leaf_grad_written_by_warp_and_accumulated_by_torch_is_an_error_at_the_import(tmp_path):
    tb = TraceBuilder()
    torch_leaf_function(tb)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT205", 30, "error")]
    finding = report.by_code("WT205")[0]
    assert "`ctx.x`" in finding.message and "counted twice" in finding.message
    assert [loc.line for loc in finding.related] == [41, 42, 50]


def test_a_torch_leaf_grad_with_one_writer_is_fine(tmp_path):
    for name, options in {
        "not handed back": {"hand_back": False},  # the Function relies on Warp's write alone
        "zeroed after handing back": {"zero_after": True},
        "accumulated into a new .grad": {"same_grad": False},  # the .grad was reset in between
        "no accumulation": {"accumulate": False},  # torch.autograd.grad, or no torch backward
    }.items():
        tb = TraceBuilder()
        torch_leaf_function(tb, **options)
        assert codes(tb.analyze(tmp_path / f"{name}.wtrace")) == [], name
