"""``has_grad_many`` (vectorized, keys built once per trace) agrees with ``has_grad`` pair by pair."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from warptrace.analysis.dataflow.grad_state import GradState


def _state(rng: np.random.Generator) -> GradState:
    state = GradState.__new__(GradState)  # only the has-grad tables: no trace needed
    n_arrays = int(rng.integers(1, 30))
    arrays = {i: SimpleNamespace(array_id=i, requires_grad=bool(rng.integers(0, 2))) for i in range(n_arrays)}
    state.model = SimpleNamespace(arrays=arrays)  # type: ignore[assignment]
    state._has_grad = {}
    for array_id in rng.choice(n_arrays, size=int(rng.integers(0, n_arrays + 1)), replace=False).tolist():
        seqs = sorted(set(rng.integers(0, 1000, size=int(rng.integers(1, 6))).tolist()))
        state._has_grad[array_id] = [(seq, bool(rng.integers(0, 2))) for seq in seqs]
    return state


def test_has_grad_many_matches_has_grad_including_queries_outside_the_change_range():
    rng = np.random.default_rng(1)
    for _ in range(200):
        state = _state(rng)
        n_arrays = len(state.model.arrays)
        for _ in range(5):  # repeated queries reuse the keys built by the first
            count = int(rng.integers(1, 50))
            ids = rng.integers(-2, n_arrays + 3, size=count)
            seqs = rng.integers(-5, 1100, size=count)
            want = [state.has_grad(int(a), int(s)) for a, s in zip(ids, seqs)]
            assert state.has_grad_many(ids, seqs).tolist() == want


def test_has_grad_many_matches_has_grad_with_sparse_ids():
    """Array ids with gaps, and change lists of ids that are no array (negative, past the
    largest): the slot table gives the ranks a search of the sorted ids would."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        ids = sorted(set(rng.integers(0, 60, size=int(rng.integers(1, 20))).tolist()))
        state = GradState.__new__(GradState)
        arrays = {i: SimpleNamespace(array_id=i, requires_grad=bool(rng.integers(0, 2))) for i in ids}
        state.model = SimpleNamespace(arrays=arrays)  # type: ignore[assignment]
        state._has_grad = {}
        for array_id in rng.choice(np.arange(-3, 70), size=int(rng.integers(0, 30)), replace=False).tolist():
            seqs = sorted(set(rng.integers(0, 1000, size=int(rng.integers(1, 6))).tolist()))
            state._has_grad[array_id] = [(seq, bool(rng.integers(0, 2))) for seq in seqs]
        for _ in range(5):
            count = int(rng.integers(1, 80))
            queried = rng.integers(-4, 75, size=count)
            seqs = rng.integers(-5, 1100, size=count)
            want = [state.has_grad(int(a), int(s)) for a, s in zip(queried, seqs)]
            assert state.has_grad_many(queried, seqs).tolist() == want


def test_static_grad_is_grad_array_at_every_seq():
    """Where ``static_grad`` answers (since, grad), ``grad_array`` is grad from since on and -1
    before; random change lists, some with several .grad objects or the flag turned off."""
    rng = np.random.default_rng(2)
    answered = 0
    for _ in range(300):
        state = _state(rng)
        n_arrays = len(state.model.arrays)
        state._grad_ids = {}
        for array_id in rng.choice(n_arrays, size=int(rng.integers(0, n_arrays + 1)), replace=False).tolist():
            seqs = sorted(set(rng.integers(0, 1000, size=int(rng.integers(1, 3))).tolist()))
            state._grad_ids[array_id] = [(seq, int(rng.integers(-1, 40))) for seq in seqs]
        for array_id in range(-1, n_arrays + 1):
            static = state.static_grad(array_id)
            if static is None:
                continue
            answered += 1
            since, grad = static
            for seq in [*rng.integers(-5, 1100, size=40).tolist(), since, since - 1]:
                if -(2**63) <= seq < 2**63:
                    assert state.grad_array(array_id, seq) == (grad if seq >= since else -1)
    assert answered > 1000


def test_has_grad_many_compares_with_the_seq_the_gradient_is_on_from_where_never_turned_off():
    """The random states of the tests above take both ways: slots answered by one comparison
    (the gradient never turned off once on) and slots left to the search."""
    rng = np.random.default_rng(1)
    compared = searched = 0
    for _ in range(200):
        _since, exact = _state(rng)._grad_since_of_slot
        compared += int(exact.sum())
        searched += int((~exact).sum())
    assert compared > 1000 and searched > 100
