"""WT301-WT311 on synthetic traces: where the chain from parameters to the loss breaks."""

from __future__ import annotations

import json

import pytest

from tests.tracebuilder import TraceBuilder
from warptrace.analysis.rules import RULE_INFO
from warptrace.trace import schema as S

FLOW = {code for code, info in RULE_INFO.items() if info.family == "flow"}


def codes(report) -> list[tuple[str, int, str]]:
    """(code, line, severity) of the flow findings."""
    return sorted((f.code, f.location.line, f.severity.label) for f in report.findings if f.code in FLOW)


def disable_backward(tb: TraceBuilder, kernel: int) -> None:
    tb.rows["kernels"]["enable_backward"][kernel] = False


# ---------------------------------------------------------------- WT301
def mlp(tb: TraceBuilder, *, hidden_grad: bool):
    x = tb.array("x", line=1)
    w1 = tb.array("w1", requires_grad=True, line=2)
    w2 = tb.array("w2", requires_grad=True, line=3)
    hidden = tb.array("hidden", requires_grad=hidden_grad, line=4)
    out = tb.array("out", requires_grad=True, line=5)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=6)
    lift = tb.kernel("lift", line=100, x="r", w1="r", hidden="w")
    readout = tb.kernel("readout", line=110, hidden="r", w2="r", out="w")
    total = tb.kernel("sq_error", line=120, out="r", loss="a")
    return x, w1, w2, hidden, out, loss, lift, readout, total


def test_intermediate_without_grad_cuts_the_chain_at_its_allocation(tmp_path):
    tb = TraceBuilder()
    x, w1, w2, hidden, out, loss, lift, readout, total = mlp(tb, hidden_grad=False)
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(lift, x=x, w1=w1, hidden=hidden, line=20)
        tb.launch(readout, hidden=hidden, w2=w2, out=out, line=21)
        tb.launch(total, out=out, loss=loss, line=22)
    tb.backward(tape, loss, line=23)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT301", 4, "error")]
    finding = report.by_code("WT301")[0]
    assert finding.location.role == "allocation"
    assert "`hidden`" in finding.message and "`w1`" in finding.message and "`w2`" not in finding.message
    assert {loc.role: loc.line for loc in finding.related} == {"write": 20, "read": 21, "backward": 23}


def test_with_grad_constants_integers_and_unused_outputs_are_fine(tmp_path):
    tb = TraceBuilder()
    x, w1, w2, hidden, out, loss, lift, readout, _total = mlp(tb, hidden_grad=True)
    labels = tb.array("labels", dtype="int32", line=7)
    mask = tb.array("mask", line=8)  # from constant labels: no parameter influences it
    cell = tb.array("cell", dtype="int32", line=9)  # integer, computed from a parameter
    probe = tb.array("probe", line=10)  # no grad, computed from w1, but nothing reads it on the way
    build_mask = tb.kernel("build_mask", line=130, labels="r", mask="w")
    bin_points = tb.kernel("bin_points", line=140, w1="r", cell="w")
    peek = tb.kernel("peek", line=150, w1="r", probe="w")
    masked = tb.kernel("masked", line=160, out="r", mask="r", cell="r", loss="a")
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(build_mask, labels=labels, mask=mask, line=20)
        tb.launch(bin_points, w1=w1, cell=cell, line=21)
        tb.launch(lift, x=x, w1=w1, hidden=hidden, line=22)
        tb.launch(peek, w1=w1, probe=probe, line=23)
        tb.launch(readout, hidden=hidden, w2=w2, out=out, line=24)
        tb.launch(masked, out=out, mask=mask, cell=cell, loss=loss, line=25)
    tb.backward(tape, loss, line=26)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


def test_requires_grad_set_before_the_backward_heals_it_and_no_backward_means_no_finding(tmp_path):
    tb = TraceBuilder()
    x, w1, w2, hidden, out, loss, lift, readout, total = mlp(tb, hidden_grad=False)
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(lift, x=x, w1=w1, hidden=hidden, line=20)
        tb.launch(readout, hidden=hidden, w2=w2, out=out, line=21)
        tb.launch(total, out=out, loss=loss, line=22)
    tb.event(S.SET_REQUIRES_GRAD, array_id=hidden, value=1.0, site=tb.site(23))
    tb.backward(tape, loss, line=24)
    assert codes(tb.analyze(tmp_path / "healed.wtrace")) == []

    tb = TraceBuilder()
    x, w1, w2, hidden, out, loss, lift, readout, total = mlp(tb, hidden_grad=False)
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(lift, x=x, w1=w1, hidden=hidden, line=20)
        tb.launch(readout, hidden=hidden, w2=w2, out=out, line=21)
        tb.launch(total, out=out, loss=loss, line=22)
    assert codes(tb.analyze(tmp_path / "forward-only.wtrace")) == []


def test_struct_field_and_a_list_of_activations_group_by_allocation_site(tmp_path):
    tb = TraceBuilder()
    x = tb.array("x", line=1)
    weights = [tb.array("weights", requires_grad=True, line=2) for _ in range(3)]
    acts = [tb.array("acts", line=3) for _ in range(2)]  # one line allocates both
    out = tb.array("out", requires_grad=True, line=4)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=5)
    dense = tb.kernel("dense", line=100, inp="r", w="r", out="w")
    total = tb.kernel("total", line=110, out="r", loss="a")
    tape = tb.tape()
    with tb.recording(tape):
        inp = x
        for w, act in zip(weights[:2], acts):
            tb.launch(dense, inp=inp, w=w, out=act, line=20)
            inp = act
        tb.launch(dense, inp=inp, w=weights[2], out=out, line=21)
        tb.launch(total, out=out, loss=loss, line=22)
    tb.backward(tape, loss, line=23)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT301", 3, "error")]
    assert report.by_code("WT301")[0].count == 2


# ---------------------------------------------------------------- WT302
def frames(tb: TraceBuilder, n_frames: int, *, zero_between: bool = False, carry: bool = True):
    force = tb.array("force", requires_grad=True, line=1)
    q0 = tb.array("q0", requires_grad=True, line=2)
    step = tb.kernel("step", line=100, q="r", force="r", q_next="w")
    track = tb.kernel("track", line=110, q="r", loss="a")
    q = q0
    for _ in range(n_frames):
        if not carry:
            q = tb.array("q_start", requires_grad=True, line=9)
        loss = tb.array("loss", shape=(1,), requires_grad=True, line=10)
        tape = tb.tape(line=11)
        with tb.recording(tape):
            q_next = tb.array("q_next", requires_grad=True, line=12)
            tb.launch(step, q=q, force=force, q_next=q_next, line=13)
            q = q_next
            tb.launch(track, q=q, loss=loss, line=14)
        tb.backward(tape, loss, line=15)
        if zero_between:
            tb.zero(tape, line=16)
    return force


def test_tape_per_frame_with_carried_state_is_a_truncated_horizon(tmp_path):
    tb = TraceBuilder()
    frames(tb, 4)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT302", 15, "error")]
    finding = report.by_code("WT302")[0]
    assert finding.count == 3
    assert "`q_next`" in finding.message and "`force`" in finding.message
    assert "truncated" in finding.message and "one tape over the whole horizon" in finding.message


def test_zeroed_between_frames_or_no_carried_state_is_not_reported(tmp_path):
    tb = TraceBuilder()
    frames(tb, 4, zero_between=True)
    assert codes(tb.analyze(tmp_path / "zeroed.wtrace")) == []
    tb = TraceBuilder()
    frames(tb, 4, carry=False)
    assert codes(tb.analyze(tmp_path / "fresh.wtrace")) == []


def test_carried_state_that_no_parameter_influences_is_not_reported(tmp_path):
    tb = TraceBuilder()
    w = tb.array("w", requires_grad=True, line=1)
    clock = tb.array("clock", line=2)
    tick = tb.kernel("tick", line=100, clock="rw")
    use = tb.kernel("use", line=110, clock="r", w="r", loss="a")
    for _ in range(3):
        loss = tb.array("loss", shape=(1,), requires_grad=True, line=10)
        tape = tb.tape(line=11)
        with tb.recording(tape):
            tb.launch(tick, clock=clock, line=12)
            tb.launch(use, clock=clock, w=w, loss=loss, line=13)
        tb.backward(tape, loss, line=14)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


# ---------------------------------------------------------------- WT303
def checkpointing(tb: TraceBuilder, *, seed_qd: bool, seed_q: bool = True):
    """Untaped forward keeping boundary states; replay each segment last to first on its own tape."""
    force = tb.array("force", requires_grad=True, line=1)
    ckpt_q = [tb.array("ckpt_q", requires_grad=True, line=2)]
    ckpt_qd = [tb.array("ckpt_qd", requires_grad=True, line=3)]
    step = tb.kernel("step", line=100, q="r", qd="r", force="r", q_out="w", qd_out="w")
    cost = tb.kernel("final_cost", line=110, q="r", loss="a")
    segments = 3
    for s in range(segments):
        ckpt_q.append(tb.array("q_next", requires_grad=True, line=30))
        ckpt_qd.append(tb.array("qd_next", requires_grad=True, line=31))
        tb.launch(
            step, q=ckpt_q[s], qd=ckpt_qd[s], force=force, q_out=ckpt_q[s + 1], qd_out=ckpt_qd[s + 1], line=32
        )
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=4)
    for s in reversed(range(segments)):
        tape = tb.tape(line=40)
        with tb.recording(tape):
            q_end = tb.array("q_next", requires_grad=True, line=30)
            qd_end = tb.array("qd_next", requires_grad=True, line=31)
            tb.launch(step, q=ckpt_q[s], qd=ckpt_qd[s], force=force, q_out=q_end, qd_out=qd_end, line=32)
            if s == segments - 1:
                tb.launch(cost, q=q_end, loss=loss, line=41)
        if s == segments - 1:
            tb.backward(tape, loss, line=42)
        else:
            if seed_q:
                tb.copy(tb.grad(q_end), tb.grad(ckpt_q[s + 1]), line=43)
            if seed_qd:
                tb.copy(tb.grad(qd_end), tb.grad(ckpt_qd[s + 1]), line=44)
            tb.backward(tape, line=45)


def test_checkpoint_boundary_seeding_only_part_of_the_state(tmp_path):
    tb = TraceBuilder()
    checkpointing(tb, seed_qd=False)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT303", 45, "error")]
    finding = report.by_code("WT303")[0]
    assert finding.count == 2
    assert "`qd_next`" in finding.message and "adjoint of `q_next`" in finding.message
    assert any(loc.role == "seed" and loc.line == 43 for loc in finding.related)


def test_checkpoint_fully_seeded_is_fine_and_is_not_a_truncated_horizon_or_a_manual_seed(tmp_path):
    tb = TraceBuilder()
    checkpointing(tb, seed_qd=True)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


# ---------------------------------------------------------------- WT304
MEAN_READ = "objective = float(np.mean(terms.numpy()))"


def seeded(
    tb: TraceBuilder, *, n: int = 8, value: float = 1.0, grads: bool = False, read: str = MEAN_READ,
    read_after: bool = False,
):  # fmt: skip
    x = tb.array("x", shape=(n,), line=1)
    w = tb.array("w", shape=(2,), requires_grad=True, line=2)
    terms = tb.array("terms", shape=(n,), requires_grad=True, line=3)
    residual = tb.kernel("residual_terms", line=100, x="r", w="r", terms="w")
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(residual, x=x, w=w, terms=terms, line=20)
    if not read_after:
        tb.value_read(terms, line=21, text=read)
    if grads:
        tb.backward(tape, grads=[terms], line=23)
    else:
        tb.memset(tb.grad(terms), value, line=22)
        tb.backward(tape, line=23)
    if read_after:
        tb.value_read(terms, line=24, text=read)


def test_fill_seed_on_many_elements_is_a_warning_at_the_seed(tmp_path):
    tb = TraceBuilder()
    seeded(tb)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT304", 22, "warning")]
    finding = report.by_code("WT304")[0]
    assert "8 elements" in finding.message and "SUM" in finding.message and "8x" in finding.message


def test_grads_dict_seed_is_reported_at_the_backward_call(tmp_path):
    tb = TraceBuilder()
    seeded(tb, grads=True)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == [("WT304", 23, "warning")]


@pytest.mark.parametrize(
    "read, after",
    [
        ("assert_np_equal(terms.numpy(), expected)", False),  # the values checked, no objective formed
        ("print(terms.numpy())", False),
        ("print(terms.numpy())", True),
    ],
)
def test_seed_without_a_contradicting_objective_is_fine(tmp_path, read, after):
    # grads={terms: ones} is Warp's vector-Jacobian product: wrong only against another objective
    for grads in (False, True):
        tb = TraceBuilder()
        seeded(tb, grads=grads, read=read, read_after=after)
        assert codes(tb.analyze(tmp_path / f"run{grads}.wtrace")) == []


def test_a_mean_taken_after_the_backward_contradicts_a_known_seed(tmp_path):
    # the objective reported from the same values, after the backward: still not what was seeded
    tb = TraceBuilder()
    seeded(tb, read_after=True)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT304", 22, "warning")]
    finding = report.by_code("WT304")[0]
    assert "weight 0.125 per element (their mean)" in finding.message and "8x" in finding.message
    assert any(loc.role == "objective" and loc.line == 24 for loc in finding.related)


REDUCERS = {
    "mean": "    wp.atomic_add(loss, 0, terms[i] / float(terms.shape[0]))",
    "sum": "    wp.atomic_add(loss, 0, terms[i])",
    "scaled": "    wp.atomic_add(loss, 0, terms[i] * scale)",  # a scalar argument: weight unknown
    "square": "    wp.atomic_add(loss, 0, terms[i] * terms[i])",  # not linear
}


def reported_after_update(
    tb: TraceBuilder, *, value: float = 1.0, reducer: str = "mean", rebuilt: bool = False,
    same_producer: bool = True, read_loss: bool = True,
):  # fmt: skip
    """A seeded backward; after it, the terms are computed again untaped (into the same array,
    or a new one from the same allocation line) and reduced by a kernel into a printed loss."""
    x = tb.array("x", shape=(8,), line=1)
    w = tb.array("w", shape=(2,), requires_grad=True, line=2)
    terms = tb.array("terms", shape=(8,), requires_grad=True, line=3)
    loss = tb.array("loss", shape=(1,), line=4)
    residual = tb.kernel("residual_terms", line=100, x="r", w="r", terms="w")
    other = tb.kernel("other_terms", line=110, x="r", terms="w")
    source = (
        "def reduce_terms(terms: wp.array(dtype=float), loss: wp.array(dtype=float), scale: float):\n"
        "    i = wp.tid()\n" + REDUCERS[reducer] + "\n"
    )
    reduce = tb.kernel("reduce_terms", line=120, source=source, terms="r", loss="a")
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(residual, x=x, w=w, terms=terms, line=20)
    tb.memset(tb.grad(terms), value, line=22)
    tb.backward(tape, line=23)
    again = tb.array("terms", shape=(8,), requires_grad=True, line=3) if rebuilt else terms
    if same_producer:
        tb.launch(residual, x=x, w=w, terms=again, line=24)
    else:
        tb.launch(other, x=x, terms=again, line=24)
    tb.launch(reduce, terms=again, loss=loss, line=25)
    if read_loss:
        tb.value_read(loss, line=26, text="print(loss.numpy()[0])")


@pytest.mark.parametrize("rebuilt", [False, True])
def test_a_mean_kernel_after_the_update_contradicts_a_seed_of_ones(tmp_path, rebuilt):
    tb = TraceBuilder()
    reported_after_update(tb, rebuilt=rebuilt)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT304", 22, "warning")]
    finding = report.by_code("WT304")[0]
    assert "`reduce_terms`, line 25" in finding.message and "8x the gradient" in finding.message


@pytest.mark.parametrize(
    "options",
    [
        {"value": 1.0 / 8},  # the seed is the mean's
        {"reducer": "sum"},  # the program reports the sum the seed backpropagates
        {"reducer": "scaled"},  # weights the trace cannot evaluate
        {"reducer": "square"},  # no linear reduction
        {"read_loss": False},  # a reduction nobody reads reports nothing
        {"rebuilt": True, "same_producer": False},  # same allocation line, another quantity
    ],
)
def test_reductions_that_do_not_contradict_the_seed(tmp_path, options):
    tb = TraceBuilder()
    reported_after_update(tb, **options)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


def test_seed_with_the_mean_taken_as_sum_over_n_is_reported(tmp_path):
    tb = TraceBuilder()
    seeded(tb, read="objective = terms.numpy().sum() / len(terms)")
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == [("WT304", 22, "warning")]


def test_mean_seed_and_scalar_seed_are_fine(tmp_path):
    tb = TraceBuilder()
    seeded(tb, value=1.0 / 8)
    assert codes(tb.analyze(tmp_path / "mean.wtrace")) == []
    tb = TraceBuilder()
    seeded(tb, n=1)
    assert codes(tb.analyze(tmp_path / "scalar.wtrace")) == []


# ---------------------------------------------------------------- WT305
def untaped_objective(tb: TraceBuilder, *, reduce_on_tape: bool, backward_on: str):
    x = tb.array("x", line=1)
    coeffs = tb.array("coeffs", requires_grad=True, line=2)
    res = tb.array("res", requires_grad=True, line=3)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=4)
    metric = tb.array("metric", shape=(1,), line=5)
    residual = tb.kernel("residual", line=100, x="r", coeffs="r", res="w")
    mean_square = tb.kernel("mean_square", line=110, res="r", loss="a")
    max_abs = tb.kernel("max_abs", line=120, res="r", metric="a")
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(residual, x=x, coeffs=coeffs, res=res, line=20)
        if reduce_on_tape:
            tb.launch(mean_square, res=res, loss=loss, line=21)
    if not reduce_on_tape:
        tb.launch(mean_square, res=res, loss=loss, line=22)
    tb.launch(max_abs, res=res, metric=metric, line=23)  # an untaped metric, printed
    tb.value_read(metric, line=24)
    if backward_on == "loss":
        tb.backward(tape, loss, line=25)
    else:
        tb.memset(tb.grad(res), 1.0, line=25)
        tb.backward(tape, line=26)


def test_backward_on_a_loss_written_by_an_untaped_launch(tmp_path):
    tb = TraceBuilder()
    untaped_objective(tb, reduce_on_tape=False, backward_on="loss")
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT305", 22, "error")]
    finding = report.by_code("WT305")[0]
    assert "`mean_square`" in finding.message and "`loss`" in finding.message and "`res`" in finding.message


def test_untaped_metric_beside_a_taped_loss_is_fine(tmp_path):
    tb = TraceBuilder()
    untaped_objective(tb, reduce_on_tape=True, backward_on="loss")
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


def test_reported_objective_off_tape_with_a_hand_seed(tmp_path):
    tb = TraceBuilder()
    untaped_objective(tb, reduce_on_tape=False, backward_on="seed")
    report = tb.analyze(tmp_path / "run.wtrace")
    # the untaped scalars are read back (metric) while the backward is seeded by hand
    assert ("WT305", 23, "error") in codes(report)
    assert ("WT304", 25, "warning") in codes(report)


def test_taped_partial_result_finished_off_tape(tmp_path):
    tb = TraceBuilder()
    x = tb.array("x", requires_grad=True, line=1)
    anchor = tb.array("anchor", line=2)
    total = tb.array("total", shape=(1,), requires_grad=True, line=3)
    objective = tb.array("objective", shape=(1,), requires_grad=True, line=4)
    data_term = tb.kernel("data_term", line=100, x="r", anchor="r", total="a")
    finalize = tb.kernel("finalize", line=110, total="r", x="r", objective="a")
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(data_term, x=x, anchor=anchor, total=total, line=20)
    tb.launch(finalize, total=total, x=x, objective=objective, line=21)
    tb.backward(tape, total, line=22)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == [("WT305", 21, "error")]


# ---------------------------------------------------------------- WT306
def loop_with_reads(tb: TraceBuilder, order: list[str], iters: int = 3):
    """Each iteration runs ``order``: forward, read, zero, backward, update (host), device_update."""
    x = tb.array("x", line=1)
    w = tb.array("w", requires_grad=True, line=2)
    model = tb.kernel("model", line=100, x="r", w="r", loss="a")
    sgd = tb.kernel("sgd", line=110, w="rw", grad="r")
    for _ in range(iters):
        loss = tb.array("loss", shape=(1,), requires_grad=True, line=10)
        tape = tb.tape(line=11)
        for step in order:
            if step == "forward":
                with tb.recording(tape):
                    tb.launch(model, x=x, w=w, loss=loss, line=12)
            elif step == "read":
                tb.value_read(tb.grad(w), line=13)
            elif step == "zero":
                tb.memset(tb.grad(w), 0.0, line=14)
            elif step == "backward":
                tb.backward(tape, loss, line=15)
            elif step == "update":
                host = tb.array("", kind=S.ARRAY_EXTERNAL, line=16)
                tb.copy(w, host, line=16)
            elif step == "device_update":
                tb.launch(sgd, w=w, grad=tb.grad(w), line=17)


def test_gradient_read_before_this_iterations_backward(tmp_path):
    tb = TraceBuilder()
    loop_with_reads(tb, ["forward", "read", "zero", "backward", "update"])
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT306", 13, "error")]
    finding = report.by_code("WT306")[0]
    assert finding.count == 3
    assert {loc.role: loc.line for loc in finding.related} == {"parameter update": 16, "backward": 15}


def test_gradient_read_after_zeroing(tmp_path):
    tb = TraceBuilder()
    loop_with_reads(tb, ["forward", "backward", "zero", "read", "update"])
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT306", 13, "error")]
    assert "after it was zeroed" in report.by_code("WT306")[0].message


def test_fresh_reads_and_logging_reads_are_fine(tmp_path):
    tb = TraceBuilder()
    loop_with_reads(tb, ["forward", "zero", "backward", "read", "update"])
    assert codes(tb.analyze(tmp_path / "fresh.wtrace")) == []
    tb = TraceBuilder()
    # a log of the (zeroed) gradient, while the device update reads the fresh one itself
    loop_with_reads(tb, ["forward", "zero", "read", "backward", "device_update"])
    assert codes(tb.analyze(tmp_path / "logging.wtrace")) == []


# ---------------------------------------------------------------- WT307
def test_backward_disabled_kernel_on_the_path_to_the_loss(tmp_path):
    tb = TraceBuilder()
    x = tb.array("x", line=1)
    w = tb.array("w", requires_grad=True, line=2)
    a = tb.array("a", requires_grad=True, line=3)
    s = tb.array("s", requires_grad=True, line=4)
    labels = tb.array("labels", line=5)
    mask = tb.array("mask", line=6)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=7)
    excite = tb.kernel("excite", line=100, x="r", w="r", a="w")
    smooth = tb.kernel("smooth", line=110, a="r", s="w")
    build_mask = tb.kernel("build_mask", line=120, labels="r", mask="w")
    objective = tb.kernel("objective", line=130, s="r", mask="r", loss="a")
    disable_backward(tb, smooth)
    disable_backward(tb, build_mask)  # constant inputs: skipping its adjoint loses nothing
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(excite, x=x, w=w, a=a, line=20)
        tb.launch(smooth, a=a, s=s, line=21)
        tb.launch(build_mask, labels=labels, mask=mask, line=22)
        tb.launch(objective, s=s, mask=mask, loss=loss, line=23)
    tb.backward(tape, loss, line=24)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT307", 21, "error")]
    finding = report.by_code("WT307")[0]
    assert "`smooth`" in finding.message and "`w`" in finding.message
    assert any(loc.role == "kernel" and loc.line == 110 for loc in finding.related)


def test_backward_disabled_kernel_on_a_tape_never_backpropagated(tmp_path):
    tb = TraceBuilder()
    w = tb.array("w", requires_grad=True, line=1)
    s = tb.array("s", requires_grad=True, line=2)
    smooth = tb.kernel("smooth", line=110, w="r", s="w")
    disable_backward(tb, smooth)
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(smooth, w=w, s=s, line=20)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


# ---------------------------------------------------------------- WT308
SLOT_VIA_FUNC = """@wp.kernel
def emit(depth: wp.array(dtype=float), stiffness: wp.array(dtype=float), count: wp.array(dtype=int),
         force: wp.array(dtype=float)):
    tid = wp.tid()
    slot = reserve_slot(count, tid)
    force[slot] = stiffness[tid] * depth[tid]
"""

ENERGY = """@wp.kernel
def energy(force: wp.array(dtype=float), count: wp.array(dtype=int), loss: wp.array(dtype=float)):
    i = wp.tid()
    if i < count[0]:
        wp.atomic_add(loss, 0, force[i] * force[i])
"""

SLOT_IN_BODY = """@wp.kernel
def emit(depth: wp.array(dtype=float), stiffness: wp.array(dtype=float), count: wp.array(dtype=int),
         force: wp.array(dtype=float)):
    tid = wp.tid()
    slot = wp.atomic_add(count, 0, 1)
    force[slot] = stiffness[tid] * depth[tid]
"""


def side_effect_trace(tb: TraceBuilder, source: str, *, custom_replay: tuple[str, ...] = ()):
    depth = tb.array("depth", line=1)
    stiffness = tb.array("stiffness", requires_grad=True, line=2)
    count = tb.array("count", shape=(1,), dtype="int32", line=3)
    force = tb.array("force", shape=(16,), requires_grad=True, line=4)
    loss = tb.array("loss", shape=(1,), requires_grad=True, line=5)
    emit = tb.kernel("emit", line=101, source=source, depth="r", stiffness="r", count="a", force="w")
    energy = tb.kernel("energy", line=121, source=ENERGY, force="r", count="r", loss="a")
    if custom_replay:
        tb.rows["kernels"]["custom_replay"][emit] = json.dumps(list(custom_replay))
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(emit, depth=depth, stiffness=stiffness, count=count, force=force, line=20)
        tb.launch(energy, force=force, count=count, loss=loss, line=21)
    tb.backward(tape, loss, line=22)
    # the recorder marks the forward arrays an adjoint rewrites (atomics replayed) as writes
    for seq, kind, adjoint, kernel in zip(
        tb.rows["events"]["seq"],
        tb.rows["events"]["kind"],
        tb.rows["events"]["adjoint"],
        tb.rows["events"]["kernel"],
    ):
        if kind == S.LAUNCH and adjoint and kernel == emit:
            tb.access(seq, count, S.ROLE_WRITE, S.FLAG_ACCUMULATE, "count")
        if kind == S.LAUNCH and adjoint and kernel == energy:
            tb.access(seq, loss, S.ROLE_WRITE, S.FLAG_ACCUMULATE, "loss")


def test_atomic_counter_in_a_function_replayed_by_the_adjoint(tmp_path):
    tb = TraceBuilder()
    side_effect_trace(tb, SLOT_VIA_FUNC)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT308", 20, "error")]
    finding = report.by_code("WT308")[0]
    assert "`emit`" in finding.message and "`count`" in finding.message
    roles = {loc.role: loc.line for loc in finding.related}
    assert roles["backward"] == 22
    assert roles["kernel write"] == 102 + 1 + 2 * 2  # builder's kernel-line convention for the third arg


def test_body_atomics_and_custom_replay_do_not_replay(tmp_path):
    tb = TraceBuilder()
    side_effect_trace(tb, SLOT_IN_BODY)
    assert codes(tb.analyze(tmp_path / "body.wtrace")) == []
    tb = TraceBuilder()
    side_effect_trace(tb, SLOT_VIA_FUNC, custom_replay=("reserve_slot",))
    assert codes(tb.analyze(tmp_path / "replay.wtrace")) == []


def test_unanalysable_kernel_writes_are_not_trusted_as_producers(tmp_path):
    tb = TraceBuilder()
    x, w1, w2, hidden, out, loss, lift, readout, total = mlp(tb, hidden_grad=False)
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(lift, x=x, w1=w1, hidden=hidden, line=20, uncertain=True)
        tb.launch(readout, hidden=hidden, w2=w2, out=out, line=21)
        tb.launch(total, out=out, loss=loss, line=22)
    tb.backward(tape, loss, line=23)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


def test_metric_launched_with_record_tape_false_beside_the_taped_loss(tmp_path):
    tb = TraceBuilder()
    x, w1, w2, hidden, out, loss, lift, readout, total = mlp(tb, hidden_grad=True)
    metric = tb.array("metric", shape=(1,), line=7)
    peak = tb.kernel("peak", line=130, out="r", metric="a")
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(lift, x=x, w1=w1, hidden=hidden, line=20)
        tb.launch(readout, hidden=hidden, w2=w2, out=out, line=21)
        tb.launch(peak, out=out, metric=metric, line=22, record=False)
        tb.launch(total, out=out, loss=loss, line=23)
    tb.value_read(metric, line=24)
    tb.backward(tape, loss, line=25)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


def test_copy_into_an_array_without_grad_inside_the_tape_is_not_recorded_and_cuts_the_chain(tmp_path):
    tb = TraceBuilder()
    x, w1, w2, hidden, out, loss, lift, readout, total = mlp(tb, hidden_grad=True)
    snapshot = tb.array("snapshot", line=7)  # wp.zeros without requires_grad
    tape = tb.tape()
    with tb.recording(tape):
        tb.launch(lift, x=x, w1=w1, hidden=hidden, line=20)
        tb.copy(snapshot, hidden, line=21)  # not recorded: the destination has no grad
        tb.launch(readout, hidden=snapshot, w2=w2, out=out, line=22)
        tb.launch(total, out=out, loss=loss, line=23)
    tb.backward(tape, loss, line=24)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT301", 7, "error")]
    assert "a copy" in report.by_code("WT301")[0].message


# ---------------------------------------------------------------- WT309
def untaped_first_layer(tb: TraceBuilder, *, inside_scope: bool, grad_read: bool = True):
    """hidden = lift(x, w1) not recorded; out, loss on the tape; w1.grad read after the backward."""
    x, w1, w2, hidden, out, loss, lift, readout, total = mlp(tb, hidden_grad=True)
    tape = tb.tape(line=9)
    if not inside_scope:
        tb.launch(lift, x=x, w1=w1, hidden=hidden, line=20)
    with tb.recording(tape):
        if inside_scope:
            tb.launch(lift, x=x, w1=w1, hidden=hidden, line=20, record=False)
        tb.launch(readout, hidden=hidden, w2=w2, out=out, line=21)
        tb.launch(total, out=out, loss=loss, line=22)
    tb.backward(tape, loss, line=23)
    if grad_read:
        tb.value_read(tb.grad(w1), line=24, text="w1.grad.numpy()")


def test_a_launch_above_the_tape_cuts_the_parameters_gradient(tmp_path):
    tb = TraceBuilder()
    untaped_first_layer(tb, inside_scope=False)
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT309", 20, "error")]
    finding = report.by_code("WT309")[0]
    assert "`hidden`" in finding.message and "`w1`" in finding.message and "`lift`" in finding.message
    assert {loc.role: loc.line for loc in finding.related} == {"read on the tape": 21, "backward": 23}


def test_record_tape_false_inside_the_scope_is_a_warning(tmp_path):
    tb = TraceBuilder()
    untaped_first_layer(tb, inside_scope=True)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == [("WT309", 20, "warning")]


def test_an_untaped_launch_whose_parameters_gradient_nobody_reads_is_silent(tmp_path):
    tb = TraceBuilder()
    untaped_first_layer(tb, inside_scope=False, grad_read=False)
    assert codes(tb.analyze(tmp_path / "run.wtrace")) == []


# ---------------------------------------------------------------- WT311
def installed_torch_seed(tb: TraceBuilder, versions: tuple[int, ...], *, tokens: tuple[int, ...] = ()):
    """Per call: ``y.grad = wp.from_torch(SEED)`` (an import naming torch tensor ``tokens[k]``,
    default 0, at ``versions[k]``), then a backward whose store adjoint consumes ``y.grad``."""
    x = tb.array("x", requires_grad=True, line=1)
    square = tb.kernel("square", line=100, x="r", y="w")
    for k, version in enumerate(versions):
        y = tb.array("y", line=2)
        seed = tb.array(kind=S.ARRAY_EXTERNAL, line=5)
        facts = {"framework": "torch", "direction": S.BRIDGE_IMPORT, "version": version}
        facts["tensor"] = tokens[k] if tokens else 0
        imported = tb.event(S.BRIDGE, site=tb.site(5), array_id=seed, detail=json.dumps(facts))
        tb.access(imported, seed, S.ROLE_NONE)
        tape = tb.tape()
        with tb.recording(tape):
            tb.launch(square, x=x, y=y, line=4)
        tb.event(S.SET_GRAD, array_id=y, ref_id=seed, site=tb.site(5))
        tb.event(S.BACKWARD_BEGIN, tape=tape, phase=S.BACKWARD, site=tb.site(6))
        adjoint = tb.event(
            S.LAUNCH, tape=tape, phase=S.BACKWARD, adjoint=True, site=tb.site(6), kernel=square
        )
        tb.access(adjoint, x, S.ROLE_READ, 0, "x")
        tb.access(adjoint, tb.grad(x), S.ROLE_WRITE, S.FLAG_ACCUMULATE, "adj_x")
        tb.access(adjoint, y, S.ROLE_NONE, 0, "y")
        tb.access(adjoint, seed, S.ROLE_READWRITE, S.FLAG_GRAD | S.FLAG_CONSUME, "adj_y")
        tb.event(S.BACKWARD_END, tape=tape, phase=S.BACKWARD, site=tb.site(6))


def test_a_torch_seed_installed_again_unchanged_is_an_error_at_the_assignment(tmp_path):
    tb = TraceBuilder()
    installed_torch_seed(tb, (0, 0, 0))
    report = tb.analyze(tmp_path / "run.wtrace")
    assert codes(report) == [("WT311", 5, "error")]
    finding = report.by_code("WT311")[0]
    assert finding.count == 2 and "version counter" in finding.message
    assert any(loc.role == "backward that zeroed it" and loc.line == 6 for loc in finding.related)


def test_a_torch_seed_changed_by_torch_or_a_new_tensor_is_fine(tmp_path):
    tb = TraceBuilder()
    installed_torch_seed(tb, (0, 1, 2))  # torch refilled it before each use
    assert codes(tb.analyze(tmp_path / "refilled.wtrace")) == []
    tb = TraceBuilder()
    installed_torch_seed(tb, (0, 0), tokens=(0, 1))  # a fresh grad_output each call
    assert codes(tb.analyze(tmp_path / "fresh.wtrace")) == []
