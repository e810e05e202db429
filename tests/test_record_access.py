"""Access rows of launches: roles and flags come from the kernel, down to struct fields."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import warptrace
from tests.test_record_common import (
    DEVICE,
    State,
    Trace,
    accumulate_kernel,
    arr,
    atomic_kernel,
    inplace_kernel,
    left_operand_kernel,
    nested_struct_kernel,
    square_sum_kernel,
    store_kernel,
    struct_func_kernel,
    struct_inplace_kernel,
)
from warptrace.trace.schema import (
    BACKWARD,
    FLAG_ACCUMULATE,
    FLAG_CONSUME,
    FLAG_FIELD,
    FLAG_GRAD,
    FLAG_STORE,
    FLAG_UNCERTAIN,
    FORWARD,
    ROLE_NONE,
    ROLE_READ,
    ROLE_READWRITE,
    ROLE_WRITE,
)


@pytest.fixture
def trace_path(tmp_path):
    yield tmp_path / "run.wtrace"
    warptrace.stop()


def _one_launch(trace_path, kernel, inputs, outputs, dim=3):
    warptrace.start(trace_path)
    wp.launch(kernel, dim=dim, inputs=inputs, outputs=outputs, device=DEVICE)
    warptrace.stop()
    trace = Trace(trace_path)
    (event,) = trace.launches(kernel.key)
    return trace, event


def test_plain_store_reads_input_and_stores_output(trace_path):
    warptrace.start(trace_path)
    x = wp.array([1.0, 2.0, 3.0], dtype=float, device=DEVICE)
    y = wp.zeros(3, dtype=float, device=DEVICE)
    trace, event = _one_launch(trace_path, store_kernel, [x], [y])
    read, write = trace.access(event["seq"], "x"), trace.access(event["seq"], "y")
    assert (read["role"], read["flags"]) == (ROLE_READ, 0)
    assert write["role"] == ROLE_WRITE
    assert write["flags"] & FLAG_STORE and not write["flags"] & FLAG_ACCUMULATE
    assert not (read["flags"] | write["flags"]) & FLAG_UNCERTAIN
    assert event["phase"] == FORWARD and not event["adjoint"] and event["executed"]
    assert trace.label(read["array_id"]) == "x" and trace.label(write["array_id"]) == "y"


def test_left_operand_read_is_a_read(trace_path):
    x, y = arr([1, 2, 3]), arr([0, 0, 0])
    trace, event = _one_launch(trace_path, left_operand_kernel, [x, y], [])
    assert trace.access(event["seq"], "x")["role"] == ROLE_READ
    assert trace.access(event["seq"], "y")["role"] == ROLE_WRITE


def test_plus_equals_is_an_accumulation(trace_path):
    x, y = arr([1, 2, 3]), arr([0, 0, 0])
    trace, event = _one_launch(trace_path, accumulate_kernel, [x], [y])
    row = trace.access(event["seq"], "y")
    assert row["role"] & ROLE_WRITE
    assert row["flags"] & FLAG_ACCUMULATE and not row["flags"] & FLAG_STORE


def test_atomic_add_is_an_accumulation(trace_path):
    x, total = arr([1, 2, 3]), arr([0])
    trace, event = _one_launch(trace_path, atomic_kernel, [x], [total])
    row = trace.access(event["seq"], "total")
    assert row["role"] == ROLE_WRITE and row["flags"] & FLAG_ACCUMULATE


def test_in_place_update_reads_and_stores(trace_path):
    x = arr([1, 2, 3])
    trace, event = _one_launch(trace_path, inplace_kernel, [x], [])
    row = trace.access(event["seq"], "x")
    assert row["role"] == ROLE_READWRITE and row["flags"] & FLAG_STORE


def _state(q, qd, inner_q):
    state = State()
    state.q, state.qd = q, qd
    inner = state.inner
    inner.q = inner_q
    state.inner = inner
    return state


def test_struct_field_updated_in_place(trace_path):
    q, qd, iq = arr([1, 2, 3]), arr([1, 1, 1]), arr([0, 0, 0])
    state = _state(q, qd, iq)
    trace, event = _one_launch(trace_path, struct_inplace_kernel, [state, 0.1], [])
    row = trace.access(event["seq"], "state", "q")
    assert row["role"] == ROLE_READWRITE
    assert row["flags"] & FLAG_FIELD and row["flags"] & FLAG_STORE
    assert trace.access(event["seq"], "state", "qd")["role"] == ROLE_READ
    assert trace.arrays[row["array_id"]]["alloc_id"] == trace.arrays[row["array_id"]]["alloc_id"]
    assert np.allclose(q.numpy(), [1.1, 2.1, 3.1])


def test_struct_field_written_inside_a_func(trace_path):
    q, qd, iq, x = arr([1, 2, 3]), arr([0, 0, 0]), arr([0, 0, 0]), arr([7, 8, 9])
    state = _state(q, qd, iq)
    trace, event = _one_launch(trace_path, struct_func_kernel, [state, x], [])
    row = trace.access(event["seq"], "state", "qd")
    assert row["role"] == ROLE_WRITE and row["flags"] & FLAG_STORE and row["flags"] & FLAG_FIELD
    assert trace.access(event["seq"], "x")["role"] == ROLE_READ
    assert trace.access(event["seq"], "state", "q")["role"] == ROLE_NONE


def test_nested_struct_field(trace_path):
    q, qd, iq, x = arr([1, 2, 3]), arr([0, 0, 0]), arr([0, 0, 0]), arr([7, 8, 9])
    state = _state(q, qd, iq)
    trace, event = _one_launch(trace_path, nested_struct_kernel, [state, x], [])
    row = trace.access(event["seq"], "state", "inner.q")
    assert row["role"] == ROLE_WRITE and row["flags"] & FLAG_FIELD
    assert trace.arrays[row["array_id"]]["alloc_id"] >= 0
    assert np.allclose(iq.numpy(), [7, 8, 9])


def test_adjoint_launches_are_backward_phase_with_grad_rows(trace_path):
    warptrace.start(trace_path)
    x = wp.array([1.0, 2.0, 3.0], dtype=float, device=DEVICE, requires_grad=True)
    y = wp.zeros(3, dtype=float, device=DEVICE, requires_grad=True)
    loss = wp.zeros(1, dtype=float, device=DEVICE, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(store_kernel, dim=3, inputs=[x], outputs=[y], device=DEVICE)
        wp.launch(square_sum_kernel, dim=3, inputs=[y], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    warptrace.stop()
    assert np.allclose(x.grad.numpy(), [8, 16, 24])

    trace = Trace(trace_path)
    forward = trace.launches(adjoint=False)
    adjoint = trace.launches(adjoint=True)
    assert [trace.kernels[e["kernel"]]["key"] for e in forward] == ["store_kernel", "square_sum_kernel"]
    assert [trace.kernels[e["kernel"]]["key"] for e in adjoint] == ["square_sum_kernel", "store_kernel"]
    assert all(e["recorded"] and e["phase"] == FORWARD for e in forward)
    assert all(e["phase"] == BACKWARD and not e["recorded"] for e in adjoint)
    tape_id = trace.of_kind("tape_create")[0]["tape"]
    assert {e["tape"] for e in forward + adjoint} == {tape_id}

    store_adj = adjoint[1]["seq"]
    # forward memory is read; x.grad accumulates; y.grad is read and consumed (a store's adjoint)
    assert trace.access(store_adj, "x", grad=False)["role"] == ROLE_READ
    x_grad = trace.access(store_adj, "x", grad=True)
    assert x_grad["role"] == ROLE_WRITE and x_grad["flags"] & FLAG_ACCUMULATE
    assert trace.label(x_grad["array_id"]) == "x.grad"
    assert trace.arrays[x_grad["array_id"]]["grad_of"] == trace.access(store_adj, "x", grad=False)["array_id"]
    y_grad = trace.access(store_adj, "y", grad=True)
    assert y_grad["role"] == ROLE_READWRITE and y_grad["flags"] & FLAG_CONSUME
    assert trace.access(store_adj, "y", grad=False)["role"] == ROLE_NONE

    loss_adj = adjoint[0]["seq"]
    # the atomic on loss replays in the backward kernel: forward memory written (WT308 evidence)
    loss_fwd = trace.access(loss_adj, "loss", grad=False)
    assert loss_fwd["role"] & ROLE_WRITE and loss_fwd["flags"] & FLAG_ACCUMULATE
    loss_grad = trace.access(loss_adj, "loss", grad=True)
    assert loss_grad["role"] == ROLE_READ and loss_grad["flags"] & FLAG_GRAD
    backward_begin = trace.of_kind("backward_begin")[0]
    assert trace.label(backward_begin["array_id"]) == "loss"


def test_retain_grad_turns_consumption_off(trace_path):
    x = arr([1, 2, 3], requires_grad=True)
    y = wp.zeros(3, dtype=float, device=DEVICE, requires_grad=True, retain_grad=True)
    loss = wp.zeros(1, dtype=float, device=DEVICE, requires_grad=True)
    warptrace.start(trace_path)
    tape = wp.Tape()
    with tape:
        wp.launch(store_kernel, dim=3, inputs=[x], outputs=[y], device=DEVICE)
        wp.launch(square_sum_kernel, dim=3, inputs=[y], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    warptrace.stop()
    trace = Trace(trace_path)
    store_adj = trace.launches("store_kernel", adjoint=True)[0]["seq"]
    y_grad = trace.access(store_adj, "y", grad=True)
    assert y_grad["role"] == ROLE_READ and not y_grad["flags"] & FLAG_CONSUME
    assert trace.arrays[trace.access(store_adj, "y", grad=False)["array_id"]]["retain_grad"]


def test_struct_adjoint_rows_follow_the_field_paths(trace_path):
    warptrace.start(trace_path)
    q = wp.array([1.0, 2.0, 3.0], dtype=float, device=DEVICE, requires_grad=True)
    qd = arr([1, 1, 1], requires_grad=True)
    iq = arr([0, 0, 0])
    state = _state(q, qd, iq)
    loss = wp.zeros(1, dtype=float, device=DEVICE, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(struct_inplace_kernel, dim=3, inputs=[state, 0.1], device=DEVICE)
        wp.launch(square_sum_kernel, dim=3, inputs=[q], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    warptrace.stop()
    trace = Trace(trace_path)
    adj = trace.launches("struct_inplace_kernel", adjoint=True)[0]["seq"]
    q_grad = trace.access(adj, "state", "q", grad=True)
    assert q_grad["flags"] & FLAG_FIELD and q_grad["flags"] & FLAG_CONSUME
    assert trace.label(q_grad["array_id"]) == "q.grad"
    qd_grad = trace.access(adj, "state", "qd", grad=True)
    assert qd_grad["role"] == ROLE_WRITE and qd_grad["flags"] & FLAG_ACCUMULATE
