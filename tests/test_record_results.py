"""Tracing never changes results: bit-identical arrays with and without the recorder."""

from __future__ import annotations

import numpy as np
import warp as wp
import warp.optim

import warptrace
from tests.test_record_common import DEVICE, State, square_sum_kernel, store_kernel, struct_inplace_kernel


def _train(steps: int = 5) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    weights = wp.array(
        rng.standard_normal(16).astype(np.float32), dtype=float, device=DEVICE, requires_grad=True
    )
    hidden = wp.zeros(16, dtype=float, device=DEVICE, requires_grad=True)
    copied = wp.zeros(16, dtype=float, device=DEVICE, requires_grad=True)
    qd = wp.array(rng.standard_normal(16).astype(np.float32), dtype=float, device=DEVICE, requires_grad=True)
    loss = wp.zeros(1, dtype=float, device=DEVICE, requires_grad=True)
    state = State()
    state.q, state.qd = copied, qd
    inner = state.inner
    inner.q = wp.zeros(16, dtype=float, device=DEVICE)
    state.inner = inner
    optimizer = warp.optim.Adam([weights, qd], lr=0.01)
    history = []
    for _ in range(steps):
        loss.zero_()
        tape = wp.Tape()
        with tape:
            wp.launch(store_kernel, dim=16, inputs=[weights], outputs=[hidden], device=DEVICE)
            wp.copy(copied, hidden)
            wp.launch(struct_inplace_kernel, dim=16, inputs=[state, 0.1], device=DEVICE)
            wp.launch(square_sum_kernel, dim=16, inputs=[copied], outputs=[loss], device=DEVICE)
        tape.backward(loss)
        optimizer.step([weights.grad, qd.grad])
        history.append(loss.numpy().copy())
        tape.zero()
    scanned = wp.zeros(16, dtype=float, device=DEVICE)
    wp.utils.array_scan(weights, scanned)
    return {
        "weights": weights.numpy(),
        "qd": qd.numpy(),
        "copied": copied.numpy(),
        "scanned": scanned.numpy(),
        "loss": np.concatenate(history),
    }


def test_bit_identical_with_and_without_tracing(tmp_path):
    plain = _train()
    with warptrace.trace(tmp_path / "run.wtrace"):
        traced = _train()
    again = _train()
    for name in plain:
        assert plain[name].tobytes() == traced[name].tobytes(), name
        assert plain[name].tobytes() == again[name].tobytes(), name
