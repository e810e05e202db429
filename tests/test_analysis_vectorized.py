"""Vectorized analysis helpers agree exactly with the plain loops and sorts they replace.

The analysis of traces with many graph replays (Newton's diffsim drone: 1200 replays, 6.7M
access rows) replaced per-event Python loops and large sorts by array code. Each test here
checks one replacement against the previous formulation on random or synthetic input.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.tracebuilder import TraceBuilder
from warptrace.analysis.dataflow import dataflow_of
from warptrace.analysis.dataflow import defuse as defuse_module
from warptrace.analysis.dataflow.base import isin_ids, unique_inverse
from warptrace.analysis.dataflow.defuse import _key_order, _stable_order, lex_order
from warptrace.analysis.model import Model
from warptrace.analysis.replay import _latest_copies, expand_captures
from warptrace.trace import schema as S
from warptrace.trace.reader import read_trace


@pytest.mark.parametrize(
    "values",
    [
        np.zeros(0, dtype=np.int64),
        np.array([5, 5, -3, 7, -3], dtype=np.int64),
        np.array([4, 1, 4], dtype=np.int32),
        np.random.default_rng(0).integers(-1, 4000, 50_000),
        np.random.default_rng(1).integers(0, 2**40, 1000),  # wide range: the sort
    ],
)
def test_unique_inverse_is_np_unique(values):
    unique, inverse = unique_inverse(values)
    expected_unique, expected_inverse = np.unique(values, return_inverse=True)
    assert unique.dtype == expected_unique.dtype
    assert np.array_equal(unique, expected_unique)
    assert np.array_equal(inverse, expected_inverse.reshape(-1))


@pytest.mark.parametrize("high", [3, 40_000, 2**40])
def test_stable_orders_are_stable_argsorts(high):
    rng = np.random.default_rng(high)
    for n in (0, 1, 7, 5000):
        alloc = rng.integers(-1, high, n)
        in_order = np.sort(rng.integers(0, 50, n))
        shuffled = rng.integers(0, 50, n)
        assert np.array_equal(_stable_order(alloc), np.argsort(alloc, kind="stable"))
        for seq in (in_order, shuffled):
            assert np.array_equal(_key_order(alloc, seq), np.argsort(alloc * 100 + seq, kind="stable"))


def _zoo_trace(zoo_traces, name: str):
    """The trace of the zoo program ``name`` (recorded once per session by the ``zoo_traces``
    fixture); the test is skipped where there is no such program."""
    from tests.zoo import discover

    programs = {program.name: program for program in discover()}
    if name not in programs:
        pytest.skip(f"no zoo program {name}")
    return zoo_traces(programs[name])


def _latest_copies_loop(origin_seq: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """The loop expand_captures used: parents point at the most recent copy of the parent."""
    out = parent.copy()
    latest: dict[int, int] = {}
    for position, seq in enumerate(origin_seq.tolist()):
        latest[seq] = position
        if out[position] >= 0:
            out[position] = latest.get(int(out[position]), -1)
    return out


def test_latest_copies_matches_the_loop():
    rng = np.random.default_rng(2)
    for _ in range(500):
        n = int(rng.integers(0, 60))
        origin = rng.integers(0, 15, n)
        parent = rng.integers(-3, 17, n)
        assert np.array_equal(_latest_copies(origin, parent), _latest_copies_loop(origin, parent))


def test_copied_rows_expand_each_graph_body_once():
    """The capture expansion's access rows and their events' positions, each graph body expanded
    once and placed at every replay: the expansion of every piece's event ranges."""
    from warptrace.analysis.dataflow.base import expand_ranges
    from warptrace.analysis.replay import _copied_rows

    rng = np.random.default_rng(5)
    counts = rng.integers(0, 4, 60)
    event_stops = np.cumsum(counts)
    event_starts = event_stops - counts
    bodies = {7: np.arange(10, 18), 8: np.arange(30, 31), 9: np.zeros(0, dtype=np.int64)}
    pieces, body_of = [], []
    for _ in range(12):
        between = np.sort(rng.choice(np.arange(40, 60), int(rng.integers(0, 4)), replace=False))
        gid = int(rng.choice(list(bodies)))
        pieces += [between, bodies[gid]]
        body_of += [-1, gid]
    index = np.concatenate(pieces)
    total = int((event_stops[index] - event_starts[index]).sum())
    rows, copy = _copied_rows(pieces, body_of, event_starts, event_stops, total)
    expected_rows, expected_copy = expand_ranges(event_starts[index], event_stops[index])
    assert np.array_equal(rows, expected_rows) and np.array_equal(copy, expected_copy)


def test_tape_table_matches_the_loop_over_tapes():
    """The model's tapes (analysis.tape_table: grouped in array passes): per tape in order of first
    appearance, its events, last creation, backward begins and ends, resets and zeros."""
    from warptrace.analysis.tape_table import tape_table

    rng = np.random.default_rng(7)
    names = [S.TAPE_CREATE, S.BACKWARD_BEGIN, S.BACKWARD_END, S.TAPE_RESET, S.TAPE_ZERO, S.LAUNCH]
    for _ in range(50):
        n = int(rng.integers(0, 300))
        tape = rng.integers(-1, 12, n) * 7
        kind = np.array([S.EVENT_KIND_CODES[name] for name in rng.choice(names, n)], dtype=np.int16)
        seq = np.cumsum(rng.integers(1, 4, n))
        table = tape_table(tape, kind, seq)
        firsts = [int(t) for t in dict.fromkeys(tape[tape >= 0].tolist())]
        assert list(table) == firsts
        for tape_id, info in table.items():
            evs = np.nonzero(tape == tape_id)[0]
            of = {name: evs[kind[evs] == S.EVENT_KIND_CODES[name]] for name in names}
            assert info.events == evs.tolist()
            assert info.created_ev == (int(of[S.TAPE_CREATE][-1]) if len(of[S.TAPE_CREATE]) else -1)
            assert info.backward_begins == seq[of[S.BACKWARD_BEGIN]].tolist()
            assert info.backward_ends == seq[of[S.BACKWARD_END]].tolist()
            assert (
                info.resets == seq[of[S.TAPE_RESET]].tolist() and info.zeros == seq[of[S.TAPE_ZERO]].tolist()
            )


def _capture_trace(tmp_path) -> TraceBuilder:
    """A graph captured once (a launch, a tape.zero with its memset inside it) and replayed
    three times, with a launch between the replays."""
    tb = TraceBuilder()
    x = tb.array("x", requires_grad=True)
    y = tb.array("y", requires_grad=True)
    step = tb.kernel("step", x="r", y="w")
    tb.event(S.CAPTURE_BEGIN, ref_id=-1)
    tb.launch(step, x=x, y=y, line=10)
    zero = tb.event(S.TAPE_ZERO)
    tb.memset(tb.grad(y), line=11)
    tb.rows["events"]["parent"][-1] = zero
    tb.event(S.CAPTURE_END, ref_id=7)
    for i in range(3):
        tb.event(S.CAPTURE_LAUNCH, ref_id=7)
        tb.launch(step, x=y, y=x, line=20 + i)
    return tb


def test_expand_captures_parents_point_at_their_replay(tmp_path):
    tb = _capture_trace(tmp_path)
    for i, kind in enumerate(tb.rows["events"]["kind"]):
        if kind in (S.LAUNCH, S.MEMSET, S.TAPE_ZERO) and i < 5:
            tb.rows["events"]["executed"][i] = False  # captured, not run
    trace = expand_captures(read_trace(tb.write(tmp_path / "capture.wtrace")))
    events = trace.tables["events"].to_pydict()
    zeros = [i for i, kind in enumerate(events["kind"]) if kind == S.TAPE_ZERO]
    memsets = [i for i, kind in enumerate(events["kind"]) if kind == S.MEMSET]
    assert len(zeros) == len(memsets) == 3
    assert [events["parent"][m] for m in memsets] == [events["seq"][z] for z in zeros]
    assert all(events["executed"][m] for m in memsets)
    assert events["seq"] == list(range(len(events["seq"])))


def _random_trace(seed: int) -> TraceBuilder:
    """Launches, copies and memsets on views that overlap partly, stores and accumulations."""
    rng = np.random.default_rng(seed)
    tb = TraceBuilder()
    bases = [tb.array(f"a{i}", shape=(16,), requires_grad=bool(i % 2)) for i in range(3)]
    arrays = list(bases)
    for base in bases:
        for offset in (0, 4, 8):
            arrays.append(tb.view(base, offset=offset, shape=(8,)))
    kernels = [
        tb.kernel("store", a="r", b="w"),
        tb.kernel("accumulate", a="r", b="a"),
        tb.kernel("update", a="rw", b="r"),
    ]
    tape = tb.tape()
    with tb.recording(tape):
        for _ in range(400):
            a, b = (int(v) for v in rng.choice(arrays, 2, replace=False))
            choice = int(rng.integers(0, 5))
            if choice < 3:
                tb.launch(kernels[choice], a=a, b=b)
            elif choice == 3:
                tb.copy(b, a)
            else:
                tb.memset(b)
    return tb


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_def_use_edges_match_a_stable_sort_by_reader(tmp_path, seed):
    model = Model(read_trace(_random_trace(seed).write(tmp_path / "random.wtrace")))
    df = dataflow_of(model)
    valid = (model.acc_alloc >= 0) & df._exec
    reads = np.nonzero(df.is_read & valid)[0]
    # the queries in row order, the pairs then grouped by reader row: how the edges were built
    readers, writers, _ = df._writers_in_order(
        model.acc_alloc[reads], df.acc_lo[reads], df.acc_hi[reads], model.acc_seq[reads]
    )
    order = np.argsort(reads[readers], kind="stable")
    assert len(order) > 400
    assert np.array_equal(df.edge_reader, reads[readers][order])
    assert np.array_equal(df.edge_writer, writers[order])
    # many queries at once are answered in (allocation, seq) order: same pairs per query
    for sort_from in (1, 1 << 30):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(defuse_module, "_SORT_QUERIES", sort_from)
            got_readers, got_writers = df._writers_for(
                model.acc_alloc[reads], df.acc_lo[reads], df.acc_hi[reads], model.acc_seq[reads]
            )
        got = np.argsort(got_readers, kind="stable")
        assert np.array_equal(got_readers[got], readers[order])
        assert np.array_equal(got_writers[got], writers[order])


def _random_replay_trace(seed: int) -> TraceBuilder:
    """Two graphs of random launches, copies and memsets (views that overlap partly or not at
    all, stores and accumulations), replayed in random order with random work between replays."""
    rng = np.random.default_rng(seed)
    tb = TraceBuilder()
    bases = [tb.array(f"a{i}", shape=(16,), requires_grad=bool(i % 2)) for i in range(2)]
    arrays = list(bases)
    for base in bases:
        arrays += [tb.view(base, offset=offset, shape=(2,)) for offset in range(0, 16, 2)]
        arrays += [tb.view(base, offset=offset, shape=(8,)) for offset in (0, 4)]
    kernels = [
        tb.kernel("store", a="r", b="w"),
        tb.kernel("accumulate", a="r", b="a"),
        tb.kernel("update", a="rw", b="r"),
    ]

    def work(count: int) -> None:
        for _ in range(count):
            a, b = (int(v) for v in rng.choice(arrays, 2, replace=False))
            choice = int(rng.integers(0, 6))
            if choice < 3:
                tb.launch(kernels[choice], a=a, b=b)
            elif choice == 3:
                tb.copy(b, a)
            elif choice == 4:
                tb.launch(kernels[1], a=a, b=b)  # more accumulations: walks up to the producer limit
            else:
                tb.memset(b)

    tb.launch(kernels[0], a=bases[0], b=bases[1])
    for graph, size in ((7, 120), (8, 15)):
        tb.event(S.CAPTURE_BEGIN, ref_id=-1)
        first = len(tb.rows["events"]["kind"])
        work(size)
        for i in range(first, len(tb.rows["events"]["kind"])):
            tb.rows["events"]["executed"][i] = False  # captured, not run
        tb.event(S.CAPTURE_END, ref_id=graph)
    for _ in range(14):
        tb.event(S.CAPTURE_LAUNCH, ref_id=int(rng.choice([7, 8])))
        work(int(rng.integers(0, 4)))
    return tb


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("limits", [(24, 4096), (3, 5)])
def test_def_use_edges_of_replays_copied_from_the_template(tmp_path, monkeypatch, seed, limits):
    """The def-use edges of graph replays that copy a template, worked out once per template
    (analysis.dataflow.replayed), are the edges of searching every replay's reads, and the write
    index placed per copy is the one sorted from every write: with the
    step and scan limits as they are, and small enough that walks inside a template pass the
    step limit and exact scans are cut."""
    from warptrace.analysis.dataflow import replayed
    from warptrace.analysis.report import build_model

    for module in (defuse_module, replayed):
        monkeypatch.setattr(module, "_STEP_LIMIT", limits[0])
    monkeypatch.setattr(defuse_module, "_SCAN_LIMIT", limits[1])
    path = _random_replay_trace(seed).write(tmp_path / "replays.wtrace")
    copied = build_model(read_trace(path))
    assert len({template for _, _, template in copied.row_copies}) == 2 and len(copied.row_copies) >= 10
    every_row = build_model(read_trace(path))
    every_row.__dict__["row_copies"] = []  # no replay taken as a copy: every read searched
    every_row.__dict__["decided_rows"] = slice(None)
    ours, theirs = replayed.ReplayedDefUse(copied), replayed.ReplayedDefUse(every_row)
    ours._build_edges()
    theirs._build_edges()
    assert len(theirs.edge_reader) > 1000
    for name in (
        "_edge_start",
        "edge_reader",
        "edge_writer",
        "edge_reader_ev",
        "edge_writer_ev",
        "w_rows",
        "w_alloc",
    ):
        assert np.array_equal(getattr(ours, name), getattr(theirs, name)), name
    for name in ("w_key", "w_lo", "w_hi", "w_store", "s_key", "s_rows", "s_lo", "s_hi"):  # the write index
        assert np.array_equal(getattr(ours, name), getattr(theirs, name)), name
        assert getattr(ours, name).dtype == getattr(theirs, name).dtype, name


def test_memory_codes_of_replays_copied_from_the_template(tmp_path, zoo_traces):
    """The memory codes of access rows in graph replays that copy a template are the template
    rows' (Seeds._memory_codes): the codes of working out every row, also where a subset of the
    rows breaks the copy pattern; fill_groups built on them is the one of every row."""
    from warptrace.analysis.dataflow.base import combine_codes
    from warptrace.analysis.report import build_model

    model = build_model(read_trace(_random_replay_trace(0).write(tmp_path / "replays.wtrace")))
    df = dataflow_of(model)
    assert model.row_copies
    rows = np.nonzero(df.is_read)[0]  # the copies' rows are the template's, moved
    start, stop, _ = model.row_copies[3]
    dropped = rows[np.searchsorted(rows, start)]
    assert dropped < stop
    uneven = rows[rows != dropped]  # that copy's rows no longer match its template's
    for subset in (rows, uneven):
        expected = unique_inverse(combine_codes([model.acc_alloc[subset], *df.hulls(subset)]))[1]
        assert np.array_equal(df._memory_codes(subset), expected)
    for name in ("ok_flow_capture_replay", "wt101_capture_replay"):
        path = _zoo_trace(zoo_traces, name)
        copied = dataflow_of(build_model(read_trace(path))).fill_groups
        every_row = build_model(read_trace(path))
        every_row.__dict__["row_copies"] = []
        every_row.__dict__["decided_rows"] = slice(None)
        walked = dataflow_of(every_row).fill_groups
        assert len(walked.calls) > 1
        for field in ("alloc", "lo", "hi", "first_row", "adjoint_row", "cuts", "calls"):
            assert np.array_equal(getattr(copied, field), getattr(walked, field)), field


def test_replay_seqs_match_backward_of_event(tmp_path):
    tb = TraceBuilder()
    x = tb.array("x", requires_grad=True)
    y = tb.array("y", requires_grad=True)
    z = tb.array("z", requires_grad=True)
    loss = tb.array("loss", shape=(1,), requires_grad=True)
    step = tb.kernel("step", a="r", b="w")
    total = tb.kernel("total", a="r", loss="a")
    for _ in range(3):
        tape = tb.tape()
        with tb.recording(tape):
            tb.launch(step, a=x, b=y)
            tb.launch(step, a=y, b=z)
            tb.launch(step, a=x, b=x)  # not on the way to the loss
            tb.launch(total, a=z, loss=loss)
        tb.backward(tape, loss)
        tb.zero(tape)
    model = Model(read_trace(tb.write(tmp_path / "replays.wtrace")))
    df = dataflow_of(model)
    assert len(df.backward_calls) == 3
    evs = np.arange(model.n_events)
    expected = []
    for ev in evs.tolist():
        call = df.backward_of_event(ev) if model.recorded[ev] else None
        expected.append(call.begin_seq if call else int(model.seq[ev]))
    assert df._replay_seqs(evs).tolist() == expected


@pytest.mark.parametrize(
    "name",
    [
        "wt303_checkpoint",
        "wt303_helper",
        "wt303_host_checkpoint",
        "ok_flow_capture_replay",
        "wt303_checkpoint_fixed",
    ],
)
def test_wt303_prune_never_hides_a_seeded_pair(name, zoo_traces):
    """WT303 skips the boundary walk of a segment pair when _may_pair_seeded says no pair can be
    seeded: on every segment pair of these programs, the full walk agrees."""
    from warptrace.analysis.report import build_model
    from warptrace.analysis.rules import unchained_boundary as wt303

    model = build_model(read_trace(_zoo_trace(zoo_traces, name)))
    df = dataflow_of(model)
    seen = 0
    for call_a in df.backward_calls[1:]:
        call_b = df.backward_calls[call_a.index - 1]
        epoch_a, epoch_b = df.epochs[call_a.epoch], df.epochs[call_b.epoch]
        if call_b.epoch == call_a.epoch or not epoch_a.events or not epoch_b.events:
            continue
        seeded = wt303._seeded_memory(model, df, call_a)
        exposed = wt303._exposed(model, df, epoch_b, call_b)
        pairs = wt303._boundary(model, df, epoch_a, exposed)
        if any(wt303._seeded_grad(model, df, a, call_a, seeded) for a, _ in pairs):
            assert wt303._may_pair_seeded(model, df, epoch_a, call_a, exposed, seeded)
            seen += 1
    if name in ("wt303_checkpoint", "wt303_helper"):
        assert seen  # a boundary with a seeded pair (wt303_host_checkpoint's comes through the host)


@pytest.mark.parametrize("name", ["wt303_checkpoint", "wt303_helper", "ok_flow_capture_replay"])
def test_grad_arrays_ever_covers_grad_array(name, zoo_traces):
    """WT303 tests an array's seeded gradient only when one of ``grad_arrays_ever`` is seeded
    memory: every ``grad_array`` answer at every seq of the trace is among them."""
    from warptrace.analysis.report import build_model

    model = build_model(read_trace(_zoo_trace(zoo_traces, name)))
    df = dataflow_of(model)
    seqs = sorted({int(s) for s in model.seq.tolist()} | {-1, int(model.seq.max()) + 1})
    answered = 0
    for array_id in model.arrays:
        ever = set(df.grad_arrays_ever(array_id))
        for seq in seqs:
            grad = df.grad_array(array_id, seq)
            if grad >= 0:
                assert grad in ever
                answered += 1
    assert answered


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dictionary_strings_match_object_strings(seed):
    """The capture expansion hands the model dictionary-encoded arg/field columns: their
    strings and codes are those of the plain string column (nulls read as "", "" also in the
    dictionary, values first seen late, more values than an int8 code holds)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from warptrace.analysis.columns import object_strings as _object_strings

    rng = np.random.default_rng(seed)
    pool = ["", "x", "src", "dest", "q", "inner.q"] + [f"v{i}" for i in range(200 if seed == 2 else 5)]
    values: list[str | None] = [pool[i] for i in rng.integers(0, len(pool), 20_000)]
    for i in rng.integers(0, len(values), 50).tolist():
        values[i] = None
    values[-1] = "seen last"
    plain = pa.chunked_array([pa.array(values, type=pa.string())])
    coded = pa.chunked_array([pc.dictionary_encode(plain.chunk(0))])
    split = pa.chunked_array(
        [pc.dictionary_encode(plain.chunk(0)[:7000]), pc.dictionary_encode(plain.chunk(0)[7000:])]
    )
    want_strings, want_codes = _object_strings(plain)
    for column in (coded, split):
        strings, codes = _object_strings(column)
        assert strings.values.tolist() == want_strings.values.tolist()
        assert codes.dtype == want_codes.dtype
        assert np.array_equal(codes, want_codes)


@pytest.mark.parametrize(
    "name",
    [
        "wt303_checkpoint",
        "wt303_helper",
        "wt303_host_checkpoint",
        "ok_flow_capture_replay",
        "wt303_checkpoint_fixed",
    ],
)
def test_wt303_content_cache_matches_direct(name, zoo_traces):
    """WT303 computes B's exposed inputs and A's pair candidates once per segment content (the
    replays of a captured graph share it): on every segment pair, the cached answers are the
    ones computed for that pair directly."""
    from warptrace.analysis.report import build_model
    from warptrace.analysis.rules import unchained_boundary as wt303

    model = build_model(read_trace(_zoo_trace(zoo_traces, name)))
    df = dataflow_of(model)
    for call_a in df.backward_calls[1:]:
        call_b = df.backward_calls[call_a.index - 1]
        epoch_a, epoch_b = df.epochs[call_a.epoch], df.epochs[call_b.epoch]
        if call_b.epoch == call_a.epoch or not epoch_a.events or not epoch_b.events:
            continue
        objective_b = df.objective_events(call_b)
        evs_b = np.asarray(epoch_b.events, dtype=np.int64)
        in_objective = np.array([ev in objective_b for ev in epoch_b.events], dtype=bool)
        exposed = wt303._exposed(model, df, epoch_b, call_b)
        assert exposed == wt303._exposed_inputs(model, df, evs_b, in_objective)
        seeded = wt303._seeded_memory(model, df, call_a)
        candidates = wt303._pair_candidates(model, df, np.asarray(epoch_a.events, dtype=np.int64), exposed)
        direct = bool(exposed) and any(wt303._seeded_grad(model, df, a, call_a, seeded) for a in candidates)
        assert wt303._may_pair_seeded(model, df, epoch_a, call_a, exposed, seeded) == direct
        evs_a = np.asarray(epoch_a.events, dtype=np.int64)
        restored_read = set()
        if any(
            model.kind[ev] == S.EVENT_KIND_CODES[S.LAUNCH] and not model.adjoint[ev] for ev in evs_a.tolist()
        ):
            for ev in evs_a.tolist():
                for row in range(model.acc_start[ev], model.acc_stop[ev]):
                    if df.is_read[row] and int(model.acc_array[row]) in df.host_restored:
                        restored_read.add(int(model.acc_array[row]))
        assert wt303._restored_reads(model, df, evs_a) == sorted(restored_read)


def test_orig_seq_of_replayed_events(tmp_path):
    """Model.orig_seq: each replayed copy carries its captured event's recorded seq, and copies
    with the same orig_seq have the same access rows."""
    model = Model(expand_captures(read_trace(_capture_trace(tmp_path).write(tmp_path / "t.wtrace"))))
    assert len(model.orig_seq) == model.n_events
    rows_of: dict[int, list[tuple]] = {}
    for ev in range(model.n_events):
        rows = [
            (int(model.acc_array[r]), int(model.acc_role[r]), int(model.acc_flags[r]), model.acc_arg[r])
            for r in range(model.acc_start[ev], model.acc_stop[ev])
        ]
        assert rows_of.setdefault(int(model.orig_seq[ev]), rows) == rows
    assert len(rows_of) < model.n_events  # some event is replayed more than once


@pytest.mark.parametrize("name", ["wt303_checkpoint", "wt401_gain", "wt402_basis", "ok_flow_capture_replay"])
def test_grad_args_many_matches_grad_args(name, zoo_traces):
    """The kernel uses ask which arguments of each launch have a gradient for all their
    (launch, backward) pairs at once: the answers of the per-launch question."""
    from warptrace.analysis.report import build_model
    from warptrace.analysis.rules import kernel_uses

    model = build_model(read_trace(_zoo_trace(zoo_traces, name)))
    df = dataflow_of(model)
    evs = np.arange(model.n_events, dtype=np.int64)
    evs = evs[model.acc_stop[evs] > model.acc_start[evs]]
    whens = [-1, *(call.begin_seq for call in df.backward_calls), int(model.seq.max()) + 1]
    answered = 0
    for when in whens:
        got = kernel_uses._grad_args_many(model, df, evs, np.full(len(evs), when, dtype=np.int64))
        want = [kernel_uses._grad_args(model, df, ev, when) for ev in evs.tolist()]
        assert got == want
        answered += sum(1 for args in want if args)
    assert answered


def _fill_rows_loop(df) -> np.ndarray:
    """The fill rows as the loop before the vectorized test computed them."""
    m = df.model
    candidates = (
        df.grad_row_mask
        & df.is_write
        & (m.phase[df.acc_ev] == S.BACKWARD)
        & (m.kind[df.acc_ev] == S.EVENT_KIND_CODES[S.LAUNCH])
        & (m.acc_alloc >= 0)
    )
    accumulating = candidates & df.is_accumulate
    for row in np.nonzero(candidates & ~df.is_accumulate & ~m.adjoint[df.acc_ev])[0].tolist():
        ev = int(df.acc_ev[row])
        for other in range(int(m.acc_start[ev]), int(m.acc_stop[ev])):
            if (
                df.is_read[other]
                and m.acc_alloc[other] == m.acc_alloc[row]
                and df.acc_lo[other] < df.acc_hi[row]
                and df.acc_lo[row] < df.acc_hi[other]
            ):
                accumulating[row] = True
                break
    return np.nonzero(accumulating)[0]


@pytest.mark.parametrize(
    "name", ["wt303_checkpoint", "wt101_copy_writeback", "wt203_dlpack_bridge", "ok_flow_capture_replay"]
)
def test_fill_rows_match_the_loop(name, zoo_traces):
    from warptrace.analysis.report import build_model

    df = dataflow_of(build_model(read_trace(_zoo_trace(zoo_traces, name))))
    assert np.array_equal(df.fill_rows, _fill_rows_loop(df))


def test_expand_captures_numbers_each_replays_tapes(tmp_path):
    """Each replay of a graph gets fresh tape ids for the tapes its body uses, numbered in tape
    id order after the trace's largest; untaped events stay -1."""
    tb = TraceBuilder()
    x = tb.array("x", requires_grad=True)
    y = tb.array("y", requires_grad=True)
    step = tb.kernel("step", x="r", y="w")
    first, second = tb.tape(), tb.tape()
    tb.event(S.CAPTURE_BEGIN, ref_id=-1)
    for tape in (second, first, second):
        with tb.recording(tape):
            tb.launch(step, x=x, y=y, line=10)
    tb.launch(step, x=y, y=x, line=11)  # untaped
    tb.event(S.CAPTURE_END, ref_id=3)
    for _ in range(3):
        tb.event(S.CAPTURE_LAUNCH, ref_id=3)
    trace = expand_captures(read_trace(tb.write(tmp_path / "tapes.wtrace")))
    events = trace.tables["events"].to_pydict()
    launches = [i for i, kind in enumerate(events["kind"]) if kind == S.LAUNCH]
    tapes = [events["tape"][i] for i in launches]
    assert tapes == [3, 2, 3, -1, 5, 4, 5, -1, 7, 6, 7, -1]


@pytest.mark.parametrize(
    ("values", "test"),
    [
        (
            np.random.default_rng(0).integers(-1, 4000, 50_000),
            np.random.default_rng(1).integers(-5, 5000, 300),
        ),
        (np.random.default_rng(2).integers(0, 30, 10_000).astype(np.int16), [3, 7, 29, 31, -1]),
        (np.random.default_rng(3).integers(0, 2**40, 1000), np.random.default_rng(4).integers(0, 2**40, 10)),
        (np.arange(10), []),
        (np.zeros(0, dtype=np.int64), [1, 2]),
        (np.arange(-3, 3), np.array([0, 2, 200], dtype=np.uint8)),
    ],
)
def test_isin_ids_is_np_isin(values, test):
    values = np.asarray(values)
    if len(values) > 1000:
        values[::97] = values[1]  # repeats
        test = np.append(np.asarray(test, dtype=np.int64), values[5])  # present for sure
    assert np.array_equal(isin_ids(values, test), np.isin(values, test))


def _provenance_reference(df) -> dict[int, frozenset[int]]:
    """Provenance event by event with plain sets (what the interned, numbered sets must give)."""
    m = df.model
    kinds = S.EVENT_KIND_CODES
    scope = m.recorded | ((m.kind == kinds[S.COPY]) & (m.tape >= 0))
    scope &= (m.phase == S.FORWARD) & ~m.adjoint & (m.parent < 0)
    scope_evs = np.nonzero(scope)[0]
    whens = df._replay_seqs(scope_evs).tolist()
    prov: dict[int, frozenset[int]] = {}
    for ev, when in zip(scope_evs.tolist(), whens):
        leaves: set[int] = set()
        for row in range(int(m.acc_start[ev]), int(m.acc_stop[ev])):
            if not df.is_read[row]:
                continue
            writers = [int(w) for w in df.writer_rows(row).tolist()]
            producers = [int(df.acc_ev[w]) for w in writers if scope[df.acc_ev[w]] and df.acc_ev[w] < ev]
            for producer in producers:
                leaves |= prov[producer]
            array_id = int(m.acc_array[row])
            if not producers and not df.grad_row_mask[row] and df.has_grad(array_id, when):
                leaves.add(df.root_array(array_id))
        prov[ev] = frozenset(leaves)
    return prov


@pytest.mark.parametrize(
    "name",
    ["wt302_copy_carry", "wt302_frames", "wt303_checkpoint", "ok_flow_capture_replay", "wt503_copy_severed"],
)
def test_provenance_matches_plain_sets(name, zoo_traces):
    from warptrace.analysis.report import build_model

    df = dataflow_of(build_model(read_trace(_zoo_trace(zoo_traces, name))))
    want = _provenance_reference(df)
    assert df.provenance == want
    assert any(want.values())


@pytest.mark.parametrize("name", ["wt302_copy_carry", "ok_flow_capture_replay"])
def test_provenance_leaf_sets_read_as_the_dict_of_every_event(name, zoo_traces):
    """Provenance hands its sets out through the scope positions (LeafSets): lookups, membership,
    order, length and items of a dict holding every scope event's set, also for events out of
    scope, negative and past the last."""
    from warptrace.analysis.dataflow.provenance import LeafSets
    from warptrace.analysis.report import build_model

    df = dataflow_of(build_model(read_trace(_zoo_trace(zoo_traces, name))))
    sets = df.provenance
    assert isinstance(sets, LeafSets)
    want = _provenance_reference(df)
    assert list(sets) == list(want) and len(sets) == len(want) and list(sets.items()) == list(want.items())
    for ev in range(-3, df.model.n_events + 3):
        assert sets.get(ev, frozenset({-1})) == want.get(ev, frozenset({-1}))
        assert sets.get(np.int64(ev)) == want.get(ev) and (ev in sets) == (ev in want)
        if ev in want:
            assert sets[ev] == want[ev]
        else:
            with pytest.raises(KeyError):
                sets[ev]
    assert sets == want and any(want.values()) and len(want) < df.model.n_events


@pytest.mark.parametrize("name", ["wt302_copy_carry", "ok_flow_capture_replay", "wt503_copy_severed"])
def test_provenance_in_small_blocks_matches_plain_sets(name, zoo_traces, monkeypatch):
    """Provenance gathers each event's edges as one range and marks the reads they reach over
    a block's rows: blocks of a few events (the rows of a block far apart, edges from earlier
    blocks) give the plain sets too."""
    from warptrace.analysis.dataflow import provenance
    from warptrace.analysis.report import build_model

    monkeypatch.setattr(provenance, "_BLOCK_EVENTS", 3)
    df = dataflow_of(build_model(read_trace(_zoo_trace(zoo_traces, name))))
    assert df.provenance == _provenance_reference(df)


@pytest.mark.parametrize(
    "name", ["wt301_zeros", "wt301_struct", "wt301_zeros_fixed", "ok_flow_capture_replay"]
)
def test_severed_chain_rows_match_a_per_row_check(name, zoo_traces):
    """WT301's rows to look at (one table per array id, one comparison per row) against the plain
    definition row by row: every access row, at seqs before, among and after the trace's."""
    from warptrace.analysis.report import build_model
    from warptrace.analysis.rules.common import differentiable_dtype
    from warptrace.analysis.rules.severed_chain import _may_lack_grad

    model = build_model(read_trace(_zoo_trace(zoo_traces, name)))
    df = dataflow_of(model)
    never = np.iinfo(np.int64).max

    def plain(row: int, when: int) -> bool:
        array_id = int(model.acc_array[row])
        if not df.is_read[row] or df.grad_row_mask[row]:
            return False
        if array_id < 0:  # rows of no array are looked at where some array has a negative id
            return any(key < 0 for key in model.arrays)
        info = model.arrays.get(array_id)
        return info is not None and differentiable_dtype(info.dtype) and when < df.grad_since(array_id, never)

    rng = np.random.default_rng(5)
    rows = np.arange(len(model.acc_array))
    high = int(model.seq.max()) + 2
    df.grad_row_mask  # noqa: B018 (worked out on the recorded ids, before some are replaced)
    ids = model.acc_array.copy()
    ids[rng.random(len(ids)) < 0.1] = -1  # no array
    ids[rng.random(len(ids)) < 0.05] = -7
    ids[rng.random(len(ids)) < 0.05] = max(model.arrays) + 3  # past the largest id
    model.acc_array = ids
    since = np.array([df.grad_since(array_id, high) for array_id in ids.tolist()], dtype=np.int64)
    at_since = np.where(since == high, rng.integers(-2, high, len(rows)), since)  # the seq it is on from
    for whens in (
        rng.integers(-2, high, len(rows)),
        np.full(len(rows), -1),
        np.full(len(rows), high),
        at_since,
    ):
        for negative in (False, True):
            if negative:
                model.arrays[-7] = next(iter(model.arrays.values()))
            got = _may_lack_grad(model, df, rows, whens)
            assert got.tolist() == [plain(row, when) for row, when in zip(rows.tolist(), whens.tolist())]
            model.arrays.pop(-7, None)
    assert _may_lack_grad(model, df, rows, np.full(len(rows), -1)).any() or name == "ok_flow_capture_replay"


@pytest.mark.parametrize("high", [3, 5000, 2**40, 2**62])
def test_lex_order_is_lexsort(high):
    """lex_order (dense codes, radix-sorted when few) is np.lexsort: few and many distinct
    combinations, and columns too wide to combine into one int64 code."""
    rng = np.random.default_rng(high % 1000)
    columns = [rng.integers(-2, 40, 30_000), rng.integers(0, high, 30_000), rng.integers(0, 7, 30_000)]
    assert np.array_equal(lex_order(columns), np.lexsort(columns[::-1]))
    assert len(lex_order([np.zeros(0, dtype=np.int64)] * 3)) == 0


@pytest.mark.parametrize(
    "name",
    [
        "ok_flow_grad_projection",
        "wt203_clip_in_place",
        "wt101_pingpong",
        "wt303_checkpoint",
        "ok_mem_inplace_linear",
    ],
)
def test_clearing_store_matches_a_per_row_check(name, zoo_traces):
    """Dataflow.clearing_store (pairs of store and read rows in numpy) against the plain
    definition: a forward store none of whose event's read rows overlaps its memory."""
    from warptrace.analysis.report import build_model

    model = build_model(read_trace(_zoo_trace(zoo_traces, name)))
    df = dataflow_of(model)
    expected = np.zeros(len(model.acc_array), dtype=bool)
    for row in range(len(model.acc_array)):
        if not (df.is_store[row] and model.phase[df.acc_ev[row]] == S.FORWARD):
            continue
        ev = int(df.acc_ev[row])
        same = range(model.acc_start[ev], model.acc_stop[ev])
        expected[row] = not any(
            df.is_read[r]
            and model.acc_alloc[r] == model.acc_alloc[row]
            and df.acc_lo[r] < df.acc_hi[row]
            and df.acc_lo[row] < df.acc_hi[r]
            for r in same
        )
    assert np.array_equal(df.clearing_store, expected)
    if name in ("ok_flow_grad_projection", "wt203_clip_in_place"):
        assert (df.is_store & ~df.clearing_store & (model.phase[df.acc_ev] == S.FORWARD)).any()


def test_model_of_access_copies_matches_copied_table(zoo_traces):
    """build_model leaves a replay's access rows uncopied (expand_replays: the model gathers its
    columns from the recorded rows): the model's access columns are those of a model of the
    table expand_captures copies, value for value and code for code."""
    from warptrace.analysis.replay import expand_replays

    trace = read_trace(_zoo_trace(zoo_traces, "ok_flow_capture_replay"))
    expanded, copies = expand_replays(trace)
    assert copies is not None and "accesses" not in expanded.tables
    gathered, copied = Model(expanded, copies), Model(expand_captures(trace))
    assert gathered.n_events == copied.n_events and len(gathered.acc_seq) == len(copied.acc_seq) > 0
    for column in ("acc_seq", "acc_array", "acc_alloc", "acc_role", "acc_flags", "acc_arg_code",
                   "acc_field_code", "acc_start", "acc_stop"):  # fmt: skip
        ours, theirs = getattr(gathered, column), getattr(copied, column)
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs), column
    rows = np.arange(len(copied.acc_seq))
    for column in ("acc_arg", "acc_field"):
        ours, theirs = getattr(gathered, column), getattr(copied, column)
        assert list(ours.values) == list(theirs.values), column
        assert ours[rows].tolist() == theirs[rows].tolist(), column


def test_provenance_copies_replays_as_the_walk_would(zoo_traces, monkeypatch):
    """Provenance copies the leaf sets of a graph replay from the replay before it when its
    events read the same (own leaves, producers inside it, leaf sets of those before it): the
    sets that walking every event gives, in the same order."""
    from warptrace.analysis.dataflow.provenance import Provenance
    from warptrace.analysis.report import build_model

    path = _zoo_trace(zoo_traces, "ok_flow_capture_replay")
    df = dataflow_of(build_model(read_trace(path)))
    copied = df.provenance
    assert df.provenance_copies > 0
    monkeypatch.setattr(Provenance, "_scope_copies", lambda self, scope_evs: [])
    walked_df = dataflow_of(build_model(read_trace(path)))
    walked = walked_df.provenance
    assert walked_df.provenance_copies == 0
    assert list(copied.items()) == list(walked.items())


def test_clearing_store_of_replays_copied_from_the_template(zoo_traces):
    """clearing_store decides the rows of a graph replay that copies an earlier one by the
    template's rows (an event's own rows decide): the mask of deciding every row."""
    from warptrace.analysis.report import build_model

    path = _zoo_trace(zoo_traces, "ok_flow_capture_replay")
    model = build_model(read_trace(path))
    assert model.row_copies
    copied = dataflow_of(model).clearing_store
    every_row = build_model(read_trace(path))
    every_row.__dict__["row_copies"] = []  # no replay taken as a copy: every row decided
    every_row.__dict__["decided_rows"] = slice(None)
    assert np.array_equal(copied, dataflow_of(every_row).clearing_store) and copied.any()


def test_access_columns_of_replays_copied_from_the_template(zoo_traces):
    """The model's access columns of a graph replay that copies an earlier one are copied from the
    template's rows (columns.take_rows), and equal the rows gathered one by one."""
    import pyarrow as pa

    from warptrace.analysis.columns import table_column
    from warptrace.analysis.replay import expand_replays

    trace, accesses = expand_replays(read_trace(_zoo_trace(zoo_traces, "ok_flow_capture_replay")))
    model = Model(trace, accesses)
    assert accesses is not None and model.row_copies
    rows = accesses.table()
    for ours, name, fill in (
        (model.acc_array, "array_id", -1),
        (model.acc_alloc, "alloc_id", -1),
        (model.acc_role, "role", 0),
        (model.acc_flags, "flags", 0),
    ):
        assert np.array_equal(ours, table_column(rows, name, fill, ours.dtype)), name
    for strings, name in ((model.acc_arg, "arg"), (model.acc_field, "field")):
        column = rows.column(name).cast(pa.string()).fill_null("").to_pylist()
        assert list(strings[np.arange(len(column))]) == column, name


@pytest.mark.parametrize("name", ["wt101_capture_replay", "ok_flow_capture_replay"])
def test_reads_at_risk_of_replays_copied_from_the_template(name, zoo_traces):
    """WT101's pending reads at risk in a graph replay that copies an earlier one are the
    template's, moved (rows, backward seqs); the writes that may hit them follow: the same as
    looking at every replay's reads."""
    from warptrace.analysis.report import build_model
    from warptrace.analysis.rules.overwrite_after_read import _reads_at_risk

    path = _zoo_trace(zoo_traces, name)
    model = build_model(read_trace(path))
    assert len(model.row_copies) >= 2
    copied = _reads_at_risk(model)
    every_row = build_model(read_trace(path))
    every_row.__dict__["row_copies"] = []  # no replay taken as a copy: every read looked at
    every_row.__dict__["decided_rows"] = slice(None)
    for ours, theirs in zip(copied, _reads_at_risk(every_row)):
        assert np.array_equal(ours, theirs)
    if name.startswith("wt101"):
        assert len(copied[0]) == 12  # 3 iterations x 4 replays


def test_expansion_of_access_rows_recorded_out_of_order(zoo_traces):
    """The capture expansion puts the recorded access rows in seq order once (the recorder writes
    a few out of order) and the copies index them directly: the model's access columns, and the
    dataflow's edges, are those of the same trace with its rows written in order."""
    import dataclasses

    import pyarrow as pa

    from warptrace.analysis.replay import expand_replays

    trace = read_trace(_zoo_trace(zoo_traces, "ok_flow_capture_replay"))
    accesses = trace.tables["accesses"]
    seq = accesses.column("seq").to_numpy()
    assert np.all(seq[1:] >= seq[:-1])
    # the seqs' groups in a shuffled order, each group's rows kept in their order (a stable sort by
    # seq gives back the recorded table)
    rank = np.random.default_rng(3).permutation(int(seq.max()) + 1)
    shuffled = accesses.take(pa.array(np.argsort(rank[seq], kind="stable")))
    tables = {**trace.tables, "accesses": shuffled}
    out_of_order = dataclasses.replace(trace, tables=tables)
    ours, theirs = Model(*expand_replays(out_of_order)), Model(*expand_replays(trace))
    assert ours.row_copies and len(ours.acc_seq) == len(theirs.acc_seq) > 0
    for column in ("acc_seq", "acc_array", "acc_alloc", "acc_role", "acc_flags", "acc_arg_code",
                   "acc_field_code", "acc_start", "acc_stop"):  # fmt: skip
        mine, expected = getattr(ours, column), getattr(theirs, column)
        assert mine.dtype == expected.dtype and np.array_equal(mine, expected), column
    for column in ("acc_arg", "acc_field"):
        assert list(getattr(ours, column).values) == list(getattr(theirs, column).values), column
    df, expected_df = dataflow_of(ours), dataflow_of(theirs)
    assert np.array_equal(df.edge_reader, expected_df.edge_reader)
    assert np.array_equal(df.edge_writer, expected_df.edge_writer)


@pytest.mark.parametrize(
    "name", ["ok_flow_capture_replay", "wt303_checkpoint", "wt204_tape_kept", "ok_acc_jacobian_rows"]
)
def test_objective_arrays_are_the_sorted_slices(name, zoo_traces):
    """objective_arrays_many (what WT301 and WT309 read) gives each call's backward slice as an
    ascending array of its events: the set objective_events gives, sorted, when every call is
    sliced together and when each call is sliced alone (a fresh dataflow per call)."""
    from warptrace.analysis.report import build_model

    path = _zoo_trace(zoo_traces, name)
    df = dataflow_of(build_model(read_trace(path)))
    calls = df.backward_calls
    assert calls
    arrays = df.objective_arrays_many(list(reversed(calls)))[::-1]
    sets = df.objective_events_many(calls)
    alone = dataflow_of(build_model(read_trace(path)))
    assert any(len(events) for events in arrays)
    for call, events, together in zip(calls, arrays, sets):
        assert events.dtype == np.int64
        assert (
            events.tolist()
            == sorted(together)
            == sorted(alone.objective_events(alone.backward_calls[call.index]))
        )


def test_narrowest_keeps_the_values():
    from warptrace.analysis.dataflow.base import narrowest

    rng = np.random.default_rng(11)
    cases = [
        (np.zeros(0, dtype=np.int64), np.int8),
        (np.array([-1, 0, 127], dtype=np.int64), np.int8),
        (np.array([-1, 128]), np.int16),
        (np.array([-32768, 32767]), np.int16),
        (np.array([-1, 32768]), np.int32),
        (np.array([0, 2**31]), np.int64),
        (rng.integers(-1, 1200, 10_000), np.int16),
        (np.array([3, 5], dtype=np.int16), np.int8),
        (np.array([3, 300], dtype=np.int16), np.int16),
    ]
    for values, dtype in cases:
        narrow = narrowest(values)
        assert narrow.dtype == np.dtype(dtype)
        assert np.array_equal(narrow, values)


@pytest.mark.parametrize(
    "name", ["wt302_copy_carry", "wt302_frames", "ok_flow_capture_replay", "wt303_checkpoint"]
)
def test_edge_passes_on_narrow_epochs(name, zoo_traces):
    """WT302's cross-tape reads and the backward slices gather the events' epochs per def-use edge
    in the smallest integer type (Dataflow.ev_epoch_narrow): the same answers as on int64 epochs."""
    from warptrace.analysis.report import build_model
    from warptrace.analysis.rules import truncated_horizon

    path = _zoo_trace(zoo_traces, name)
    results = []
    for narrow in (True, False):
        model = build_model(read_trace(path))
        df = dataflow_of(model)
        if narrow:
            assert df.ev_epoch_narrow.itemsize < 8 and np.array_equal(df.ev_epoch_narrow, df.ev_epoch)
        else:
            df.__dict__["ev_epoch_narrow"] = df.ev_epoch  # the int64 epochs
        cross = truncated_horizon._cross_tape_reads(model, df)
        slices = df.objective_arrays_many(df.backward_calls)
        results.append((cross, [events.tolist() for events in slices]))
    assert results[0] == results[1]
    assert results[0][1] and any(results[0][1])
    assert results[0][0] or not name.startswith("wt302")  # cross-tape reads there


@pytest.mark.parametrize(
    "name", ["wt302_copy_carry", "wt302_frames", "ok_flow_capture_replay", "wt303_checkpoint"]
)
def test_cross_tape_reads_match_a_per_edge_loop(name, zoo_traces):
    """WT302's cross-tape reads (the edges read on a tape picked first, their writers' epochs
    gathered only there) against the plain definition edge by edge: a read on one tape of what a
    recorded event of another tape wrote, directly or through an untaped copy that carries it."""
    from warptrace.analysis.report import build_model
    from warptrace.analysis.rules import truncated_horizon

    model = build_model(read_trace(_zoo_trace(zoo_traces, name)))
    df = dataflow_of(model)
    copy = S.EVENT_KIND_CODES[S.COPY]
    direct, carried = [], []
    for edge in range(len(df.edge_writer_ev)):
        writer, reader, row = (
            int(df.edge_writer_ev[edge]),
            int(df.edge_reader_ev[edge]),
            int(df.edge_reader[edge]),
        )
        a_uid, b_uid = int(df.ev_epoch[writer]), int(df.ev_epoch[reader])
        if b_uid < 0:
            continue
        if a_uid >= 0 and a_uid != b_uid:
            direct.append((a_uid, b_uid, writer, reader, row))
        untaped_copy = model.kind[writer] == copy and not model.recorded[writer]
        if untaped_copy and model.phase[writer] == S.FORWARD and model.parent[writer] < 0:
            for source in sorted(df.carried_writers(writer)):
                if 0 <= int(df.ev_epoch[source]) != b_uid:
                    carried.append((int(df.ev_epoch[source]), b_uid, source, reader, row))
    want: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for a_uid, b_uid, writer, reader, row in sorted(direct + carried, key=lambda read: read[:2]):
        want.setdefault((a_uid, b_uid), []).append((writer, reader, row))
    assert truncated_horizon._cross_tape_reads(model, df) == want
    assert want or not name.startswith("wt302")


def test_untaped_producer_skips_sourceless_copies_as_the_full_checks_do(zoo_traces, monkeypatch, tmp_path):
    """WT309 skips a copy that is no round trip through the host and carried no recorded write
    before its other checks: the findings of going through all of them, on zoo programs with
    untaped producers, copies and round trips through numpy; and the skip saves checks (counted
    calls of _grads_read_after_in) on some of them."""
    from tests.zoo import discover
    from warptrace.analysis.report import build_model
    from warptrace.analysis.rules import untaped_producer as wt309

    names = {
        "wt309_untaped_init",
        "wt309_numpy_round_trip",
        "wt309_numpy_round_trip_fixed",
        "wt302_copy_carry",
        "wt103_copy_carry",
        "wt503_copy_severed",
        "ok_flow_capture_replay",
    }
    programs = [program for program in discover() if program.name in names]
    if not programs:
        pytest.skip("no zoo programs")
    asked: list[int] = []
    original = wt309._grads_read_after_in

    def counted(*args):
        asked.append(1)
        return original(*args)

    monkeypatch.setattr(wt309, "_grads_read_after_in", counted)
    saved = 0
    round_trip = _host_round_trip_trace().write(tmp_path / "round_trip.wtrace")
    for path in [round_trip, *(zoo_traces(program) for program in programs)]:
        found = {}
        for skip in (True, False):
            monkeypatch.setattr(wt309, "_SKIP_SOURCELESS_COPIES", skip)
            asked.clear()
            found[skip] = ([f.to_dict() for f in wt309.check(build_model(read_trace(path)))], len(asked))
        assert found[True][0] == found[False][0], path
        assert found[True][1] <= found[False][1]
        assert found[True][0] or path != round_trip  # the copy linked to a value read is reported
        saved += found[False][1] - found[True][1]
    assert saved > 0


def _host_round_trip_trace() -> TraceBuilder:
    """On a tape: hidden = lift(x, w1); hidden.numpy() comes back as relay (an untaped copy from
    the host, linked to the value read by its digest); out = readout(relay, w2); the loss; then
    backward and hidden.grad read: WT309 on the copy, with no recorded write carried by it."""
    import json

    from tests.test_rules_flow import mlp

    tb = TraceBuilder()
    x, w1, w2, hidden, out, loss, lift, readout, total = mlp(tb, hidden_grad=True)
    relay = tb.array("relay", requires_grad=True, line=7)
    tape = tb.tape(line=9)
    host = {"digest": "0123456789abcdef", "nbytes": 16}
    with tb.recording(tape):
        tb.launch(lift, x=x, w1=w1, hidden=hidden, line=20)
        read = tb.event(S.VALUE_READ, tape=tape, array_id=hidden, detail=json.dumps({"host": "read", **host}))
        tb.access(read, hidden, S.ROLE_READ, 0, "")
        back = tb.event(S.COPY, tape=tape, recorded=False, detail=json.dumps({"host": "write", **host}))
        tb.access(back, relay, S.ROLE_WRITE, S.FLAG_STORE, "dest")
        tb.launch(readout, hidden=relay, w2=w2, out=out, line=22)
        tb.launch(total, out=out, loss=loss, line=23)
    tb.backward(tape, loss, line=24)
    tb.value_read(tb.grad(hidden), line=25, text="hidden.grad.numpy()")
    return tb


@pytest.mark.parametrize(
    "name",
    ["wt309_untaped_init", "wt309_numpy_round_trip", "wt309_untaped_init_fixed", "ok_flow_capture_replay"],
)
def test_untaped_producers_through_the_edges_of_events_match_the_rows(name, zoo_traces):
    """WT309 finds each backward slice's untaped producers through its events' def-use edges (one
    range per event): the producers, first reads and arrays of going through the slice's access
    rows (reads not of a gradient buffer) and each row's producers, for every backward call."""
    from warptrace.analysis.report import build_model
    from warptrace.analysis.rules.common import backpropagated
    from warptrace.analysis.rules.untaped_producer import _first_untaped_reads

    model = build_model(read_trace(_zoo_trace(zoo_traces, name)))
    df = dataflow_of(model)
    real = ~model.recorded & (model.phase == S.FORWARD) & ~model.adjoint & (model.parent < 0)
    pairs = backpropagated(df)
    slices = df.objective_arrays_many([call for _, call in pairs])
    found = 0
    every = np.ones(model.n_events, dtype=bool)  # also every event a producer: grad-buffer reads too
    some = np.random.default_rng(4).random(model.n_events) < 0.5
    for consumers, untaped in [
        *((events, real) for events in slices),
        *((np.arange(model.n_events), mask) for mask in (real, every, some)),
    ]:
        rows, index = df.rows_of_events(consumers)
        keep = df.is_read[rows] & ~df.grad_row_mask[rows]
        rows, index = rows[keep], index[keep]
        first: dict[int, tuple[int, int]] = {}
        for row, k in zip(rows.tolist(), index.tolist()):
            for writer in df.writer_rows(row).tolist():
                producer = int(df.acc_ev[writer])
                if untaped[producer] and producer not in first:
                    first[producer] = (k, int(model.acc_array[row]))
        producers, firsts, arrays = _first_untaped_reads(model, df, consumers, untaped)
        assert producers.tolist() == sorted(first)
        assert list(zip(firsts.tolist(), arrays.tolist())) == [first[p] for p in sorted(first)]
        edges, owner = df.edges_of_events(consumers)
        writers, _ = df.writer_rows_many(rows)
        assert np.array_equal(df.edge_writer[edges[~df.grad_row_mask[df.edge_reader[edges]]]], writers)
        assert np.array_equal(consumers[owner], df.edge_reader_ev[edges])
        found += len(first)
    assert found


def test_wt303_memory_codes_of_replays_copied_from_the_template(zoo_traces):
    """WT303's memory codes per array id are numbered from the ids of the rows outside graph
    replays that copy a template (a copy's rows are its template's): the codes of counting every
    row's id."""
    from warptrace.analysis.report import build_model
    from warptrace.analysis.rules.unchained_boundary import _RowCodes

    path = _zoo_trace(zoo_traces, "ok_flow_capture_replay")
    model = build_model(read_trace(path))
    assert model.row_copies
    ours = _RowCodes(model, dataflow_of(model))
    every_row = build_model(read_trace(path))
    every_row.__dict__["row_copies"] = []  # no replay taken as a copy: every row counted
    every_row.__dict__["decided_rows"] = slice(None)
    theirs = _RowCodes(every_row, dataflow_of(every_row))
    assert (ours._low, ours.n_keys) == (theirs._low, theirs.n_keys)
    assert np.array_equal(ours._key_of_id, theirs._key_of_id)
    rows = np.arange(len(model.acc_array))
    assert np.array_equal(ours.key(rows), theirs.key(rows)) and ours.n_keys > 1


def _random_taped_replay_trace(seed: int) -> TraceBuilder:
    """Graphs that record random launches, copies and memsets on a tape and backpropagate it (a
    captured forward + backward), replayed in random order, with random untaped work between the
    replays and at times a tape recorded outside the graph across replays."""
    rng = np.random.default_rng(seed)
    tb = TraceBuilder()
    bases = [tb.array(f"a{i}", shape=(16,), requires_grad=bool(i % 3)) for i in range(3)]
    arrays = list(bases)
    for base in bases:
        arrays += [tb.view(base, offset=offset, shape=(4,)) for offset in range(0, 16, 4)]
    loss = tb.array("loss", shape=(1,), requires_grad=True)
    kernels = [
        tb.kernel("store", a="r", b="w"),
        tb.kernel("accumulate", a="r", b="a"),
        tb.kernel("update", a="rw", b="r"),
    ]
    reduce = tb.kernel("reduce", a="r", b="a")

    def work(count: int) -> None:
        for _ in range(count):
            a, b = (int(v) for v in rng.choice(arrays, 2, replace=False))
            choice = int(rng.integers(0, 6))
            line = 10 + int(rng.integers(0, 4))
            if choice < 3:
                tb.launch(kernels[choice], a=a, b=b, line=line + choice)
            elif choice == 3:
                tb.copy(b, a, line=line + 20)
            elif choice == 4:
                tb.launch(kernels[1], a=a, b=b, line=line + 30)
            else:
                tb.memset(b, line=line + 40)

    def recorded(count: int) -> int:
        tape = tb.tape(line=5)
        with tb.recording(tape):
            work(count)
            tb.launch(reduce, a=int(rng.choice(arrays)), b=loss, line=8)
        tb.backward(tape, loss, line=9)
        return tape

    tb.launch(kernels[0], a=bases[0], b=bases[1])
    captured = {}
    for graph, size in ((7, 40), (8, 6)):
        tb.event(S.CAPTURE_BEGIN, ref_id=-1)
        first = len(tb.rows["events"]["kind"])
        captured[graph] = recorded(size)
        for i in range(first, len(tb.rows["events"]["kind"])):
            tb.rows["events"]["executed"][i] = False  # captured, not run
        tb.event(S.CAPTURE_END, ref_id=graph)
    kept = tb.tape(line=60)  # one tape recorded again and again (same pending keys)
    open_tapes: list[int] = []
    for _ in range(30):
        if rng.random() < 0.15:  # a tape left open across replays
            open_tapes.append(tb.tape(line=50) if rng.random() < 0.5 else kept)
            with tb.recording(open_tapes[-1]):
                work(3)
        graph = int(rng.choice([7, 7, 8]))
        tb.event(S.CAPTURE_LAUNCH, ref_id=graph)
        work(int(rng.integers(0, 3)))
        if rng.random() < 0.1:  # more recorded on the replay's tape, outside the graph
            with tb.recording(captured[graph]):
                work(2)
            tb.backward(captured[graph], line=52)
        if open_tapes and rng.random() < 0.3:
            tb.backward(open_tapes.pop(0), line=51)
    return tb


@pytest.mark.parametrize("bucket_limit", [256, 2])
def test_overwrites_of_replays_copied_from_the_template(tmp_path, monkeypatch, zoo_traces, bucket_limit):
    """WT101-WT104's pass takes the runs of graph replays that copy their template from the
    template's run (overwrite_replays): the findings and post-loss overwrites of passing every
    row, on random captured forward + backward graphs (with tapes open across replays, where the
    runs are passed row by row) and on the zoo's capture programs; also with a bucket size limit
    small enough that the pass drops the reads that are over in and after copied runs."""
    from warptrace.analysis.report import build_model
    from warptrace.analysis.rules import overwrite_after_read, overwrite_replays
    from warptrace.analysis.rules.post_loss import post_loss_launches

    for module in (overwrite_after_read, overwrite_replays):
        monkeypatch.setattr(module, "BUCKET_LIMIT", bucket_limit)

    applied = []
    plain_apply = overwrite_replays.ReplayRuns.apply_block

    def counting(self, *args):
        after = plain_apply(self, *args)
        applied.append(after >= 0)
        return after

    monkeypatch.setattr(overwrite_replays.ReplayRuns, "apply_block", counting)
    names = (
        "wt101_capture_replay",
        "ok_flow_capture_replay",
        "wt103_capture_eager_backward",
        "wt103_capture_epoch_reload",
    )
    paths = [_zoo_trace(zoo_traces, name) for name in names]
    paths += [_random_taped_replay_trace(seed).write(tmp_path / f"replays{seed}.wtrace") for seed in range(8)]
    n_findings = 0
    for path in paths:
        model = build_model(read_trace(path))
        assert model.row_copies
        ours = overwrite_after_read._overwrites(model, post_loss_launches(model))
        with monkeypatch.context() as patch:
            patch.setattr(overwrite_after_read, "plan_replay_runs", lambda *args: None)
            theirs = overwrite_after_read._overwrites(model, post_loss_launches(model))
        assert [f.to_dict() for f in ours[0]] == [f.to_dict() for f in theirs[0]], path
        assert [f.key for f in ours[0]] == [f.key for f in theirs[0]]
        assert ours[1] == theirs[1]
        n_findings += len(ours[0])
    assert n_findings > 20
    assert any(applied) and not all(applied)  # runs taken from the template, and passed row by row


def _overwrites_against_every_row(model, monkeypatch) -> list:
    """``_overwrites`` of the model, checked equal to passing every row (no replay taken from its
    template's run): its findings."""
    from warptrace.analysis.rules import overwrite_after_read
    from warptrace.analysis.rules.post_loss import post_loss_launches

    ours = overwrite_after_read._overwrites(model, post_loss_launches(model))
    with monkeypatch.context() as patch:
        patch.setattr(overwrite_after_read, "plan_replay_runs", lambda *args: None)
        theirs = overwrite_after_read._overwrites(model, post_loss_launches(model))
    assert [f.to_dict() for f in ours[0]] == [f.to_dict() for f in theirs[0]]
    assert [f.key for f in ours[0]] == [f.key for f in theirs[0]]
    assert ours[1] == theirs[1]
    return ours[0]


def _summary(findings: list) -> list[tuple]:
    """(code, line, read line, backward line, count) of each finding, in order."""
    return [
        (f.code, f.location.line, *(r.line for r in f.related if r.role in ("read", "backward")), f.count)
        for f in findings
    ]


def test_overwrites_of_a_copy_whose_tape_is_recorded_on_after_it(tmp_path, monkeypatch):
    """A captured tape recorded on outside the graph after a replay is that replay's tape: a read
    recorded there with the pending key of a read the replay left pending (over) takes that read's
    place in the allocation's reads, ahead of reads added before it. The pass then reports the
    overwrite of both with the later read first; a copy taken from its template's run no longer
    holds the read it left, so such a copy is passed row by row (the check that no read outside a
    copy has its tapes)."""
    from warptrace.analysis.report import build_model

    tb = TraceBuilder()
    x = tb.array("x", shape=(16,), requires_grad=True)
    quarter = [tb.view(x, offset=offset, shape=(4,)) for offset in (0, 4, 8, 12)]
    loss = tb.array("loss", shape=(1,), requires_grad=True)
    use = tb.kernel("use", a="r", b="a")
    tb.event(S.CAPTURE_BEGIN, ref_id=-1)
    first = len(tb.rows["events"]["kind"])
    tape = tb.tape(line=5)
    with tb.recording(tape):
        tb.launch(use, a=quarter[0], b=loss, line=10)  # at risk (the memset below) and left pending
        tb.memset(quarter[2], line=11)
    tb.backward(tape, loss, line=12)
    for i in range(first, len(tb.rows["events"]["kind"])):
        tb.rows["events"]["executed"][i] = False  # captured, not run
    tb.event(S.CAPTURE_END, ref_id=7)
    tb.event(S.CAPTURE_LAUNCH, ref_id=7)  # the template
    tb.event(S.CAPTURE_LAUNCH, ref_id=7)  # a copy: its tape is the one recorded on next
    with tb.recording(tape):
        later = tb.launch(use, a=quarter[1], b=loss, line=10)
        same_key = tb.launch(use, a=quarter[0], b=loss, line=10)  # the copy's read's pending key
        write = tb.memset(x, line=20)
    tb.backward(tape, loss, line=21)
    model = build_model(read_trace(tb.write(tmp_path / "recorded_on.wtrace")))
    assert len(model.row_copies) == 1
    findings = _overwrites_against_every_row(model, monkeypatch)
    assert _summary(findings) == [("WT101", 20, 10, 21, 2)]
    moved = len(model.seq) - tb.seq  # the replays' events come before the reads (seqs renumbered)
    evidence = findings[0].evidence
    assert evidence["read_seqs"] == [same_key + moved, later + moved]
    assert evidence["write_seqs"] == [write + moved] * 2


def _pending_reads_replay_trace(steps: list[str]) -> TraceBuilder:
    """Two graphs that each read ``n`` one-element views of ``x`` on a tape (``n`` over half the
    bucket's clean-up limit: two runs' reads together exceed it), overwrite the first of them
    (WT101) and backpropagate; the others stay pending, over. ``steps``: ``"7"``/``"8"`` a replay
    of that graph, ``"write"`` an untaped memset of ``x`` outside the reads (it ends the reads
    that are over), ``"reads"`` ``n`` reads on another tape of the views graph 8 reads, left
    pending and backpropagated."""
    from warptrace.analysis.rules.overwrite_replays import BUCKET_LIMIT

    n = BUCKET_LIMIT // 2 + 1
    tb = TraceBuilder()
    x = tb.array("x", shape=(2 * n + 1,), requires_grad=True)
    cells = [tb.view(x, offset=i, shape=(1,)) for i in range(2 * n + 1)]
    loss = tb.array("loss", shape=(1,), requires_grad=True)
    use = tb.kernel("use", a="r", b="a")

    def read_all(tape: int, first: int, line: int, hit: int) -> None:
        with tb.recording(tape):
            for cell in cells[first : first + n]:
                tb.launch(use, a=cell, b=loss, line=line)
            tb.memset(cells[hit], line=line + 1)  # makes them at risk; overwrites `hit` only
        tb.backward(tape, loss, line=line + 2)

    for graph, first in ((7, 0), (8, n)):
        tb.event(S.CAPTURE_BEGIN, ref_id=-1)
        begin = len(tb.rows["events"]["kind"])
        read_all(tb.tape(line=5), first, 10 * graph, hit=first)
        for i in range(begin, len(tb.rows["events"]["kind"])):
            tb.rows["events"]["executed"][i] = False  # captured, not run
        tb.event(S.CAPTURE_END, ref_id=graph)
    other = tb.tape(line=6)
    for step in steps:
        if step == "write":
            tb.memset(cells[2 * n], line=40)
        elif step == "reads":
            read_all(other, n, 30, hit=2 * n)
        else:
            tb.event(S.CAPTURE_LAUNCH, ref_id=int(step))
    return tb


def _watch_replay_runs(monkeypatch) -> list[tuple]:
    """The calls of the pass on runs of copied replays, in order: ("template", usable) at the end
    of each template run, ("block", copies, applied, reads left pending over) per block."""
    from warptrace.analysis.rules import overwrite_replays

    calls: list[tuple] = []
    runs = overwrite_replays.ReplayRuns
    plain_close, plain_apply = runs.close_template, runs.apply_block

    def close_template(self, run, *args):
        plain_close(self, run, *args)
        calls.append(("template", self.template_runs[run].usable))

    def apply_block(self, block_id, *args):
        after = plain_apply(self, block_id, *args)
        block = self.blocks[block_id]
        calls.append(("block", len(block.row_shifts), after >= 0, self.phantom.get(block.alloc, 0)))
        return after

    monkeypatch.setattr(runs, "close_template", close_template)
    monkeypatch.setattr(runs, "apply_block", apply_block)
    return calls


@pytest.mark.parametrize(
    "steps, expected",
    [
        # reads over before the template exceed the limit with its reads: the template's run
        # (where the clean-up runs) is not used
        (["reads", "7", "write", "7"], [("template", False), ("block", 1, False, 0)]),
        # ... before the first copy: the copies are passed row by row
        (["7", "reads", "7"], [("template", True), ("block", 1, False, 0)]),
        # the reads one copy leaves pending and the next copy's exceed it
        (["7", "write", "7", "7"], [("template", True), ("block", 2, False, 0)]),
        # one copy, taken from the template's run, and then one more after a write
        (
            ["7", "write", "7", "write", "7"],
            [("template", True), ("block", 1, True, "left"), ("block", 1, True, "left")],
        ),
    ],
)
def test_overwrites_of_copies_where_the_bucket_is_cleaned_up(tmp_path, monkeypatch, steps, expected):
    """The pass drops the reads that are over from an allocation's reads once they exceed the
    clean-up limit; a copy is taken from its template's run only where no clean-up could run inside
    either. Runs whose reads, with those pending before them, exceed the limit go row by row; the
    findings are those of passing every row. (The check is conservative, and with it off the
    findings here still agree: a clean-up drops only reads that are over, which no write reports,
    so it can only change where a later read with the same pending key is placed; the reads
    pending before a run never share a key with the run's (a replay's tapes are its own, a copy's
    are checked not to be used outside it), and its first write ends them. ``calls`` pins that
    each case occurs and the path the pass takes.)"""
    from warptrace.analysis.report import build_model
    from warptrace.analysis.rules.overwrite_replays import BUCKET_LIMIT

    n = BUCKET_LIMIT // 2 + 1
    tb = _pending_reads_replay_trace(steps)
    model = build_model(read_trace(tb.write(tmp_path / "cleanup.wtrace")))
    assert model.row_copies
    calls = _watch_replay_runs(monkeypatch)
    findings = _overwrites_against_every_row(model, monkeypatch)
    assert _summary(findings) == [("WT101", 71, 70, 72, steps.count("7"))]
    assert calls == [(*call[:3], n - 1) if call[-1] == "left" else call for call in expected]


def test_overwrites_after_a_copy_counts_the_reads_it_left_pending(tmp_path, monkeypatch):
    """A copy taken from its template's run leaves its reads pending in the pass (over: only their
    number still counts, towards the clean-up). They count for the next graph's copy, whose reads
    with them exceed the clean-up limit: it is passed row by row, and its reads clean them up; both
    graphs' findings are those of passing every row. (Like the clean-up check, the count is
    conservative: the findings agree without it; ``calls`` pins that it is kept and used.)"""
    from warptrace.analysis.report import build_model
    from warptrace.analysis.rules.overwrite_replays import BUCKET_LIMIT

    n = BUCKET_LIMIT // 2 + 1
    tb = _pending_reads_replay_trace(["7", "write", "8", "write", "7", "8"])
    model = build_model(read_trace(tb.write(tmp_path / "left.wtrace")))
    assert len(model.row_copies) == 2
    calls = _watch_replay_runs(monkeypatch)
    findings = _overwrites_against_every_row(model, monkeypatch)
    assert _summary(findings) == [("WT101", 71, 70, 72, 2), ("WT101", 81, 80, 82, 2)]
    assert calls == [
        ("template", True),
        ("template", True),
        ("block", 1, True, n - 1),
        ("block", 1, False, n - 1),
    ]


def test_dataflow_row_columns_of_replays_copied_from_the_template(tmp_path, zoo_traces):
    """The dataflow's executed mask and its array-id bounds are worked out on the rows outside graph
    replays that copy a template and copied into those: the same as gathering every row's."""
    from warptrace.analysis.dataflow.base import DataflowBase
    from warptrace.analysis.report import build_model

    paths = [_zoo_trace(zoo_traces, name) for name in ("ok_flow_capture_replay", "wt101_capture_replay")]
    paths.append(_random_replay_trace(1).write(tmp_path / "replays.wtrace"))
    for path in paths:
        model = build_model(read_trace(path))
        assert model.row_copies
        ours = DataflowBase(model)
        every_row = build_model(read_trace(path))
        every_row.__dict__["row_copies"] = []  # no replay taken as a copy: every row gathered
        every_row.__dict__["decided_rows"] = slice(None)
        theirs = DataflowBase(every_row)
        assert np.array_equal(ours._exec, model.executed[model.acc_near_ev])
        assert np.array_equal(ours._exec, theirs._exec)
        rows = np.arange(len(model.acc_seq))
        assert np.array_equal(ours.acc_lo[rows], theirs.acc_lo[rows])
        assert np.array_equal(ours.acc_hi[rows], theirs.acc_hi[rows])
        assert ours.acc_lo._clip == theirs.acc_lo._clip


def test_expanded_events_take_only_the_columns_copied(zoo_traces):
    """The capture expansion takes the events' columns that copies keep and adds the ones each copy
    gets anew (seq, parent, executed, tape): the table of taking every column and replacing those
    four, column for column and in the same order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from warptrace.analysis.replay import expand_replays

    trace = read_trace(_zoo_trace(zoo_traces, "ok_flow_capture_replay"))
    expanded = expand_replays(trace)[0].tables["events"]
    events = trace.tables["events"].combine_chunks()
    events = events.take(np.argsort(events.column("seq").to_numpy(), kind="stable"))
    origin = np.searchsorted(events.column("seq").to_numpy(), expanded.column("orig_seq").to_numpy())
    every = pc.take(events, pa.array(origin))
    for name in ("seq", "parent", "executed", "tape"):
        every = every.set_column(every.schema.get_field_index(name), name, expanded.column(name))
    every = every.append_column("orig_seq", expanded.column("orig_seq"))
    every = every.append_column("replay", expanded.column("replay"))
    assert expanded.num_rows > events.num_rows
    assert expanded.schema.equals(every.schema, check_metadata=True)
    assert expanded.equals(every)


@pytest.mark.parametrize("limits", [(24, 4096), (3, 5)])
def test_slices_of_replays_copied_from_the_template(tmp_path, monkeypatch, zoo_traces, limits):
    """The backward slice of a call in a graph replay whose edges are its template's takes the
    template call's slice, moved (Seeds._moved_slices): the slices of walking every call's edges,
    all calls together and one by one, on random captured forward + backward graphs and the zoo's
    capture programs, also with the step and scan limits cut so that walks inside a template pass
    the step limit."""
    from warptrace.analysis.dataflow import replayed
    from warptrace.analysis.dataflow.seeds import Seeds
    from warptrace.analysis.report import build_model

    for module in (defuse_module, replayed):
        monkeypatch.setattr(module, "_STEP_LIMIT", limits[0])
    monkeypatch.setattr(defuse_module, "_SCAN_LIMIT", limits[1])
    n_moved = []
    plain = Seeds._moved_slices

    def counting(self, *args):
        moved = plain(self, *args)
        n_moved.append(len(moved))
        return moved

    monkeypatch.setattr(Seeds, "_moved_slices", counting)
    names = ("ok_flow_capture_replay", "wt101_capture_replay", "wt103_capture_eager_backward")
    paths = [_zoo_trace(zoo_traces, name) for name in names]
    paths += [_random_taped_replay_trace(seed).write(tmp_path / f"replays{seed}.wtrace") for seed in range(6)]
    for path in paths:
        df = dataflow_of(build_model(read_trace(path)))
        ours = df.objective_arrays_many(df.backward_calls)
        with monkeypatch.context() as patch:
            patch.setattr(Seeds, "_moved_slices", lambda self, *args: {})
            walked = dataflow_of(build_model(read_trace(path)))
            theirs = walked.objective_arrays_many(walked.backward_calls)
            alone = dataflow_of(build_model(read_trace(path)))
            one_by_one = [alone.objective_events(call) for call in alone.backward_calls]
        assert len(ours) == len(theirs) > 1
        for mine, walked_slice, walked_set in zip(ours, theirs, one_by_one):
            assert np.array_equal(mine, walked_slice)
            assert set(mine.tolist()) == walked_set
    assert sum(n_moved) > 50


def test_grouped_fills_in_call_order_match_the_sort():
    """Seeds.fill_groups' grouping of the fill rows by memory: where the rows' calls never
    decrease, the presence table of (call, memory) pairs and the first positions from growing
    prefixes give the groups, first rows, first adjoint rows, cuts and calls of the stable sort
    by memory (dtypes too); elsewhere the fast path declines."""
    from warptrace.analysis.dataflow.fill_groups import (
        first_positions,
        grouped_fills_in_call_order,
        grouped_fills_sorted,
    )

    rng = np.random.default_rng(11)
    answered = 0
    for trial in range(400):
        n = int(rng.integers(0, 3000 if trial % 10 else 40_000))
        rows = np.sort(rng.choice(10 * n + 5, size=n, replace=False)).astype(np.int64)
        n_memory = int(rng.integers(1, 40))
        memory = rng.integers(0, n_memory, n).astype(np.int64)
        if trial % 4 == 0 and n:  # a memory first filled late, some codes never
            memory[: n // 2] = memory[: n // 2] % max(1, n_memory // 3)
        steps = rng.random(n) < float(rng.choice([0.001, 0.05, 0.5]))
        calls = int(rng.integers(0, 5)) + np.cumsum(steps).astype(np.int64)
        if trial % 7 == 0 and n > 1:  # calls that go back: not in call order
            calls[int(rng.integers(1, n))] = -1 if trial % 14 == 0 else 0
            calls[0] = max(int(calls[0]), 1)
        adjoint = rng.random(n) < float(rng.choice([0.0, 0.01, 0.9, 1.0]))
        fast = grouped_fills_in_call_order(rows, memory, calls, adjoint)
        if fast is None:
            assert (
                n == 0
                or bool(np.any(calls[1:] < calls[:-1]))
                or (calls[-1] + 1) * n_memory > 4 * n + (1 << 16)
            )
            continue
        answered += 1
        want = grouped_fills_sorted(rows, memory, calls, adjoint)
        for got, expected in zip(fast, want):
            assert np.array_equal(got, expected)
            assert got.dtype == expected.dtype
    assert answered > 250
    codes = rng.integers(0, 9, 50_000)
    first = first_positions(codes, 12)
    for code in range(12):
        hits = np.flatnonzero(codes == code)
        assert first[code] == (hits[0] if len(hits) else len(codes))


def test_provenance_starts_counted_match_the_search():
    """Provenance's per-position starts of its ascending producer and leaf indexes, counted
    (``_starts_of``), are the binary search of every position, empty and repeated ones too."""
    from warptrace.analysis.dataflow.provenance import _starts_of

    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(1, 400))
        index = np.sort(rng.integers(0, n, int(rng.integers(0, 3 * n)))).astype(np.int64)
        got = _starts_of(index, n)
        want = np.searchsorted(index, np.arange(n + 1), side="left")
        assert np.array_equal(got, want) and got.dtype == want.dtype


@pytest.mark.parametrize("seed", [0, 1])
def test_expanded_replay_column_points_at_each_copys_launch(tmp_path, seed):
    """expand_replays' per-event ``replay`` and ``executed`` (repeated per piece of the expansion):
    a copied event points at the capture_launch just before its replay's events and ran; every
    other event has -1. The random replay traces, plus a launch of a graph never captured (an
    empty body) and launches with nothing between them."""
    tb = _random_replay_trace(seed)
    tb.event(S.CAPTURE_LAUNCH, ref_id=99)  # no such graph: nothing copied
    tb.event(S.CAPTURE_LAUNCH, ref_id=7)
    tb.event(S.CAPTURE_LAUNCH, ref_id=8)
    path = tb.write(tmp_path / "replays.wtrace")
    events = expand_captures(read_trace(path)).tables["events"]
    kind = events.column("kind").to_pylist()
    replay = events.column("replay").to_numpy()
    executed = events.column("executed").to_numpy(zero_copy_only=False)
    orig = events.column("orig_seq").to_numpy()
    recorded = read_trace(path).tables["events"]
    captured = set()  # recorded seqs inside a capture window
    inside = False
    for seq, k in zip(recorded.column("seq").to_pylist(), recorded.column("kind").to_pylist()):
        if k == S.CAPTURE_END:
            inside = False
        if inside:
            captured.add(seq)
        if k == S.CAPTURE_BEGIN:
            inside = True
    copies = 0
    launch = -1
    for i, k in enumerate(kind):
        if int(orig[i]) in captured:
            copies += 1
            assert replay[i] == launch >= 0 and kind[launch] == S.CAPTURE_LAUNCH and executed[i]
        else:
            assert replay[i] == -1
            launch = i if k == S.CAPTURE_LAUNCH else -1
    assert copies > 100


@pytest.mark.parametrize(
    "name",
    [
        "wt303_checkpoint",
        "wt303_host_checkpoint",
        "ok_flow_checkpoint_saved_adjoint",
        "ok_flow_vjp_seed",
        "wt304_fill_seed",
        "wt304_grads_dict",
        "wt305_seed_total",
        "ok_flow_capture_replay",
        "wt204_tape_kept",
        "ok_acc_jacobian_rows",
    ],
)
def test_seeds_found_together_match_each_call_alone(name, zoo_traces):
    """Seeds._find_seeds_many (the candidate rows of every call gathered at once, as _slices asks)
    gives each call's hand seeds as _find_seeds of that call alone: all calls, every other one,
    and in reverse order, each on a fresh dataflow."""
    from warptrace.analysis.report import build_model

    path = _zoo_trace(zoo_traces, name)
    alone = dataflow_of(build_model(read_trace(path)))
    calls = alone.backward_calls
    assert calls
    want = [alone._find_seeds(call) for call in calls]
    for pick in (calls, calls[::2], calls[::-1]):
        together = dataflow_of(build_model(read_trace(path)))
        picked = [together.backward_calls[call.index] for call in pick]
        assert together._find_seeds_many(picked) == [want[call.index] for call in pick]
    # through the cache, as the slices fill it
    sliced = dataflow_of(build_model(read_trace(path)))
    sliced.objective_arrays_many(sliced.backward_calls)
    assert [sliced.seeds(call) for call in sliced.backward_calls] == want


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_seeds_found_together_on_random_traces(tmp_path, seed):
    """_find_seeds_many equals _find_seeds per call on random traces: tapes recorded again and
    again or anew, backward calls with and without loss= and grads=, hand seeds (memsets, fills
    and stores of gradient buffers, from gradients or not) between them, and calls that run no
    adjoint launch."""
    from warptrace.analysis.report import build_model

    rng = np.random.default_rng(seed)
    tb = TraceBuilder()
    params = [tb.array(f"p{i}", shape=(8,), requires_grad=True) for i in range(4)]
    grads = [tb.grad(p) for p in params]
    step = tb.kernel("step", a="r", b="w")
    tape = tb.tape()
    for _ in range(int(rng.integers(5, 12))):
        if rng.integers(0, 3) == 0:
            tape = tb.tape()
        with tb.recording(tape):
            for _ in range(int(rng.integers(0, 4))):
                a, b = (int(v) for v in rng.choice(params, 2, replace=False))
                tb.launch(step, a=a, b=b)
        for _ in range(int(rng.integers(0, 5))):  # hand seeds before the backward
            g = int(rng.choice(grads))
            choice = int(rng.integers(0, 4))
            if choice == 0:
                tb.memset(g)
            elif choice == 1:
                tb.memset(g, 1.0)
            else:
                source = int(rng.choice(grads if choice == 2 else params))
                if source != g:
                    tb.launch(step, a=source, b=g)
        if rng.integers(0, 3) == 0:  # an adjoint launch run by hand: a store into a gradient, no seed
            g = int(rng.choice(grads))
            seq = tb.event(S.LAUNCH, tape=-1, phase=S.FORWARD, adjoint=True, kernel=step)
            tb.access(seq, g, S.ROLE_WRITE, S.FLAG_STORE, "b")
        loss = int(rng.choice(params)) if rng.integers(0, 2) else None
        keys = [int(p) for p in params if rng.integers(0, 4) == 0]
        if rng.integers(0, 2):
            tb.backward(tape, loss, grads=keys, adjoints=bool(rng.integers(0, 4)))
            continue
        # a backward whose first adjoint launch comes before more writes of gradient buffers:
        # those lie after the window where seeds are looked for
        tb.event(S.BACKWARD_BEGIN, tape=tape, phase=S.BACKWARD, array_id=-1 if loss is None else loss)
        seq = tb.event(S.LAUNCH, tape=tape, phase=S.BACKWARD, adjoint=True, kernel=step)
        tb.access(seq, int(rng.choice(grads)), S.ROLE_WRITE, S.FLAG_ACCUMULATE, "b")
        for g in rng.choice(grads, int(rng.integers(1, 3)), replace=False).tolist():
            seq = tb.event(S.MEMSET, tape=tape, phase=S.BACKWARD, value=float(rng.integers(0, 2)), array_id=g)
            tb.access(seq, g, S.ROLE_WRITE, S.FLAG_STORE, "")
        tb.event(S.BACKWARD_END, tape=tape, phase=S.BACKWARD)
    path = tb.write(tmp_path / "seeds.wtrace")
    alone = dataflow_of(build_model(read_trace(path)))
    calls = alone.backward_calls
    assert len(calls) >= 5
    want = [alone._find_seeds(call) for call in calls]
    assert any(want)
    for pick in (calls, calls[1::2]):
        together = dataflow_of(build_model(read_trace(path)))
        picked = [together.backward_calls[call.index] for call in pick]
        assert together._find_seeds_many(picked) == [want[call.index] for call in pick]


@pytest.mark.parametrize("seed", [0, 1])
def test_acc_ev_of_positional_seqs_is_the_checked_index(tmp_path, seed):
    """Model.acc_ev where the seqs are the event positions (a capture expansion: acc_near_ev is
    acc_seq itself) is the index checked row by row (seq[index] == acc_seq, else -1), and so it is
    on the trace as recorded."""
    path = _random_replay_trace(seed).write(tmp_path / "replays.wtrace")
    for model in (Model(expand_captures(read_trace(path))), Model(read_trace(path))):
        index = model.acc_near_ev
        want = np.where(model.seq[index] == model.acc_seq, index, -1)
        assert np.array_equal(model.acc_ev, want) and model.acc_ev.dtype == np.int64
    expanded = Model(expand_captures(read_trace(path)))
    assert expanded.acc_near_ev is expanded.acc_seq  # the fast path is taken there


def test_fill_info_shared_per_filling_calls_matches_each_memory_own(zoo_traces, monkeypatch):
    """``Seeds._fill_info`` works out the lists of a set of filling calls once for every gradient
    memory filled by them: each array's answer is the one worked out for its memory alone. The
    programs have memories filled by one set of calls and memories filled by different ones."""
    from warptrace.analysis.dataflow.seeds import Seeds
    from warptrace.analysis.report import build_model

    seen = []
    for name in ["wt203_train_loop", "wt203_split/wt203_split_main", "wt302_frames", "ok_acc_two_stage"]:
        path = _zoo_trace(zoo_traces, name)
        shared_df = dataflow_of(build_model(read_trace(path)))
        ids = sorted(shared_df.model.arrays)
        shared = {array_id: shared_df._fill_info(array_id) for array_id in ids}
        with monkeypatch.context() as patch:
            patch.setattr(Seeds, "_fill_by_calls", property(lambda self: {}))  # never found: one per memory
            own_df = dataflow_of(build_model(read_trace(path)))
            own = {array_id: own_df._fill_info(array_id) for array_id in ids}
        assert shared == own, name
        filled = [value for value in shared_df._fill_cache.values() if value[0]]
        own_filled = [value for value in own_df._fill_cache.values() if value[0]]
        assert len({id(value) for value in own_filled}) == len(own_filled) == len(filled)
        seen.append((len(filled), len({id(value) for value in filled})))
    assert any(memories > results for memories, results in seen)  # memories sharing their lists
    assert any(results > 1 for _, results in seen)  # different calls, different lists


def _random_replays_between_tapes(seed: int) -> TraceBuilder:
    """A graph whose body records random launches and copies on a tape (arrays with and without
    gradients, views that overlap), replayed many times with random work between the replays,
    untaped or recorded: some replays read what the one before them did, others do not."""
    rng = np.random.default_rng(seed)
    tb = TraceBuilder()
    bases = [tb.array(f"p{i}", shape=(8,), requires_grad=i < 3) for i in range(5)]
    arrays = list(bases) + [tb.view(bases[i], offset=4, shape=(4,)) for i in range(5)]
    kernels = [tb.kernel("store", a="r", b="w"), tb.kernel("accumulate", a="r", b="a")]
    tape = tb.tape()

    def work(count: int) -> None:
        for _ in range(count):
            a, b = (int(v) for v in rng.choice(arrays, 2, replace=False))
            if rng.integers(0, 4) == 0:
                tb.copy(b, a)
            else:
                tb.launch(kernels[int(rng.integers(0, 2))], a=a, b=b)

    tb.event(S.CAPTURE_BEGIN, ref_id=-1)
    first = len(tb.rows["events"]["kind"])
    with tb.recording(tape):
        work(12)
    for i in range(first, len(tb.rows["events"]["kind"])):
        tb.rows["events"]["executed"][i] = False  # captured, not run
    tb.event(S.CAPTURE_END, ref_id=5)
    between = tb.tape()
    for _ in range(12):
        tb.event(S.CAPTURE_LAUNCH, ref_id=5)
        # what the next replay reads may change: untaped work, or work recorded on another tape
        # (in provenance's scope: the leaf sets of the producers before a replay change)
        choice = int(rng.integers(0, 3))
        if choice == 1:
            work(int(rng.integers(1, 3)))
        elif choice == 2:
            with tb.recording(between):
                work(int(rng.integers(1, 3)))
    return tb


def test_provenance_copies_of_random_replays_are_the_walked_sets(tmp_path, monkeypatch):
    """On random taped replays, provenance copies a replay's leaf sets only where walking it gives
    the same sets (``same``: events, own leaves, producers and their leaf sets compared), and
    walks the others: both outcomes occur."""
    from warptrace.analysis.dataflow.provenance import Provenance
    from warptrace.analysis.report import build_model

    scope_copies = Provenance._scope_copies
    found: list[int] = []

    def counted(self, scope_evs):
        copies = scope_copies(self, scope_evs)
        found.append(len(copies))
        return copies

    candidates, copied = 0, 0
    for seed in range(12):
        path = _random_replays_between_tapes(seed).write(tmp_path / f"taped{seed}.wtrace")
        with monkeypatch.context() as patch:
            patch.setattr(Provenance, "_scope_copies", counted)
            df = dataflow_of(build_model(read_trace(path)))
            ours = df.provenance
        with monkeypatch.context() as patch:
            patch.setattr(Provenance, "_scope_copies", lambda self, scope_evs: [])  # every replay walked
            walked = dataflow_of(build_model(read_trace(path))).provenance
        assert list(ours.items()) == list(walked.items()), seed
        candidates += found.pop()
        copied += df.provenance_copies
    assert 0 < copied < candidates


def _unknown_loss_trace(tmp_path):
    """Three backward calls, the middle one's loss an array object whose memory is unknown."""
    tb = TraceBuilder()
    x = tb.array("x", requires_grad=True)
    y = tb.array("y", requires_grad=True)
    loss = tb.array("loss", shape=(1,), requires_grad=True)
    unknown = tb._register(label="unknown", shape=(1,))  # no allocation: alloc_id -1
    step = tb.kernel("step", a="r", b="w")
    total = tb.kernel("total", a="r", loss="a")
    for target in (loss, unknown, loss):
        tape = tb.tape()
        with tb.recording(tape):
            tb.launch(step, a=x, b=y)
            tb.launch(total, a=y, loss=loss)
        tb.backward(tape, target)
        tb.zero(tape)
    return tb.write(tmp_path / "unknown_loss.wtrace")


@pytest.mark.parametrize(
    "name",
    ["wt303_checkpoint", "wt304_fill_seed", "ok_flow_capture_replay", "wt203_train_loop", "unknown loss"],
)
def test_slice_queries_are_the_per_target_loop(name, zoo_traces, monkeypatch, tmp_path):
    """``Seeds._slices`` asks ``_writers_for`` about each call's targets (its loss, the owners of
    its hand seeds) of a known memory, in call order, with their memories looked up per array
    (``Model.memory_of``): the queries of looking each target up in turn."""
    from warptrace.analysis.dataflow.seeds import Seeds
    from warptrace.analysis.report import build_model

    path = _unknown_loss_trace(tmp_path) if name == "unknown loss" else _zoo_trace(zoo_traces, name)
    df = dataflow_of(build_model(read_trace(path)))
    if name == "unknown loss":
        losses = [call.loss for call in df.backward_calls]
        assert (
            len(losses) == 3
            and df.model.arrays[losses[1]].alloc_id < 0 <= df.model.arrays[losses[0]].alloc_id
        )
    m = df.model
    asked = []
    plain = Seeds._writers_for

    def recording(self, *columns):
        asked.append([np.asarray(column).copy() for column in columns])
        return plain(self, *columns)

    monkeypatch.setattr(Seeds, "_writers_for", recording)
    calls = df.backward_calls
    df.objective_arrays_many(calls)
    want: list[list[int]] = [[], [], [], []]
    for call in calls:
        targets = [call.loss] if call.loss >= 0 else []
        targets += [owner for _, _, owner, _ in df.seeds(call) if owner >= 0]
        for array_id in targets:
            info = m.arrays.get(int(array_id))
            if info is None or info.alloc_id < 0:
                continue
            for column, value in zip(want, (info.alloc_id, *info.hull, call.begin_seq)):
                column.append(value)
    if not want[0]:
        assert not asked
        return
    assert len(asked) == 1
    for got, expected in zip(asked[0], want):
        assert got.dtype == np.int64 and got.tolist() == expected


def test_memory_of_is_each_arrays_hull(tmp_path):
    """``Model.memory_of``: per array id, its allocation and byte hull, -1 (and 0, 0) where the id
    names no array or an array without allocation; repeated, unknown and negative ids included."""
    tb = TraceBuilder()
    base = tb.array("base", shape=(16,))
    view = tb.view(base, offset=4, shape=(4,))
    other = tb.array("other", shape=(3,), requires_grad=True)
    unknown = tb._register(label="unknown", shape=(1,))  # no allocation: alloc_id -1
    model = Model(read_trace(tb.write(tmp_path / "memory.wtrace")))
    assert model.arrays[unknown].alloc_id < 0
    ids = [view, base, -1, other, 10_000, unknown, view, *model.arrays]
    alloc, lo, hi = model.memory_of(np.asarray(ids, dtype=np.int64))
    for i, array_id in enumerate(ids):
        info = model.arrays.get(array_id)
        known = info is not None and info.alloc_id >= 0
        assert (alloc[i], lo[i], hi[i]) == ((info.alloc_id, *info.hull) if known else (-1, 0, 0))
    assert len(model.memory_of(np.zeros(0, dtype=np.int64))[0]) == 0
