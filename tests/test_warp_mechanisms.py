"""The Warp mechanisms the rule catalog is built on, measured on the installed Warp.

Each test is the few-line experiment ``docs/warp-limits.md`` cites for a rule: it runs a
kernel, backpropagates, and asserts the gradient Warp computes next to the true one. When a
Warp release changes a mechanism, the test that fails names the rule whose model of Warp is
now wrong. Nothing here uses warptrace.
"""

from __future__ import annotations

import numpy as np
import pytest

wp = pytest.importorskip("warp")
wp.config.quiet = True

DEVICE = "cpu"


def _array(values, dtype=float):
    return wp.array(np.asarray(values, dtype=np.float32), dtype=dtype, requires_grad=True, device=DEVICE)


def _backward(launches, seed_array, seed=None):
    """Record ``launches`` (callables) on a tape, seed ``seed_array`` (ones by default), backward."""
    tape = wp.Tape()
    with tape:
        for launch in launches:
            launch()
    values = np.ones(seed_array.shape, dtype=np.float32) if seed is None else np.asarray(seed, np.float32)
    tape.backward(grads={seed_array: wp.array(values, dtype=float, device=DEVICE)})
    return tape


def _grad(kernel, inputs, out_index=-1, dim=1, scalars=()):
    """Gradients of every array of ``inputs`` for the sum of ``inputs[out_index]``."""
    arrays = [_array(values) for values in inputs]
    _backward([lambda: wp.launch(kernel, dim, [*arrays, *scalars], device=DEVICE)], arrays[out_index])
    return [a.grad.numpy().copy() for a in arrays]


# ---------------------------------------------------------------- WT401: in-place math


@wp.kernel
def inplace_mul(x: wp.array(dtype=float), s: wp.array(dtype=float)):
    i = wp.tid()
    x[i] *= s[i]


def test_wt401_inplace_multiply_gives_the_factor_the_new_value():
    """``x[i] *= s[i]`` with x = 2, s = 3: d x_new / d s is 2 (the old x); Warp gives 6."""
    x_grad, s_grad = _grad(inplace_mul, [[2.0], [3.0]], out_index=0)
    assert x_grad[0] == pytest.approx(3.0)
    assert s_grad[0] == pytest.approx(6.0)  # true: 2.0


# ---------------------------------------------------------------- WT402: component assignment


@wp.func
def squash(p: wp.vec3):
    q = p
    height = q[2] * 2.0
    q[2] = p[2] * p[2]
    return q[2] + height


@wp.kernel
def squash_kernel(p: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
    out[0] = squash(p[0])


def test_wt402_reassigned_component_keeps_the_old_adjoint():
    """``q = p; h = 2 q[2]; q[2] = p[2]^2``: d/dz (z^2 + 2z) at z = 3 is 8; Warp gives 9
    (the adjoint of the overwritten ``q[2]`` still flows into ``p[2]``)."""
    p = wp.array([[0.0, 0.0, 3.0]], dtype=wp.vec3, requires_grad=True, device=DEVICE)
    out = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    _backward([lambda: wp.launch(squash_kernel, 1, [p, out], device=DEVICE)], out)
    assert p.grad.numpy()[0, 2] == pytest.approx(9.0)  # true: 8.0


# ---------------------------------------------------------------- WT403: dynamic loops


@wp.kernel
def running_product(x: wp.array(dtype=float), n: int, out: wp.array(dtype=float)):
    p = float(1.0)  # noqa: UP018 (a dynamic variable for Warp)
    for k in range(n):
        p *= x[k]
    out[0] = p


@wp.kernel
def sum_then_product(a: wp.array(dtype=float), c: wp.array(dtype=float), n: int, out: wp.array(dtype=float)):
    s = float(1.0)  # noqa: UP018 (a dynamic variable for Warp)
    for j in range(n):
        s += a[j]
    out[0] = s * c[0]


@wp.kernel
def sum_then_square(a: wp.array(dtype=float), n: int, out: wp.array(dtype=float)):
    s = float(1.0)  # noqa: UP018 (a dynamic variable for Warp)
    for j in range(n):
        s += a[j]
    out[0] = s * s


@wp.kernel
def sum_then_store(a: wp.array(dtype=float), n: int, out: wp.array(dtype=float)):
    s = float(1.0)  # noqa: UP018 (a dynamic variable for Warp)
    for j in range(n):
        s += a[j]
    out[0] = s
    out[1] = 2.0 * s


@wp.func
def raw_sum(a: wp.array(dtype=float), n: int):
    s = float(1.0)  # noqa: UP018 (a dynamic variable for Warp)
    for j in range(n):
        s += a[j]
    return s


@wp.func
def squared_sum(a: wp.array(dtype=float), n: int):
    s = float(1.0)  # noqa: UP018 (a dynamic variable for Warp)
    for j in range(n):
        s += a[j]
    return s * s


@wp.kernel
def square_in_caller(a: wp.array(dtype=float), n: int, out: wp.array(dtype=float)):
    s = raw_sum(a, n)
    out[0] = s * s


@wp.kernel
def square_in_func(a: wp.array(dtype=float), n: int, out: wp.array(dtype=float)):
    out[0] = squared_sum(a, n)


@wp.kernel
def unrolled_sum_then_product(a: wp.array(dtype=float), c: wp.array(dtype=float), out: wp.array(dtype=float)):
    s = float(1.0)  # noqa: UP018 (a dynamic variable for Warp)
    for j in range(5):
        s += a[j]
    out[0] = s * c[0]


@wp.kernel
def long_sum_then_product(a: wp.array(dtype=float), c: wp.array(dtype=float), out: wp.array(dtype=float)):
    s = float(1.0)  # noqa: UP018 (a dynamic variable for Warp)
    for j in range(20):  # beyond the default max_unroll of 16: a dynamic loop
        s += a[j % 5]
    out[0] = s * c[0]


@wp.kernel(module="unique", module_options={"max_unroll": 32})
def long_sum_then_product_unrolled(
    a: wp.array(dtype=float), c: wp.array(dtype=float), out: wp.array(dtype=float)
):
    s = float(1.0)  # noqa: UP018 (a dynamic variable for Warp)
    for j in range(20):  # unrolled under the module option max_unroll = 32
        s += a[j % 5]
    out[0] = s * c[0]


A = [1.0, 2.0, 3.0, 4.0, 5.0]  # 1 + sum = 16


def test_wt403_product_carried_by_a_dynamic_loop():
    """``p *= x[k]`` over ``range(n)``: [6, 4.5, 3] for x = [1.5, 2, 3]; Warp gives [54, 18, 3]."""
    arrays = [_array([1.5, 2.0, 3.0]), _array([0.0])]
    _backward([lambda: wp.launch(running_product, 1, [arrays[0], 3, arrays[1]], device=DEVICE)], arrays[1])
    assert np.allclose(arrays[0].grad.numpy(), [54.0, 18.0, 3.0])  # true: [6, 4.5, 3]


def _after_loop(kernel, with_c=True, n=5, outputs=1):
    a, c, out = _array(A), _array([3.0]), _array([0.0] * outputs)
    args = [a, c] if with_c else [a]
    _backward([lambda: wp.launch(kernel, 1, [*args, n, out], device=DEVICE)], out)
    return a.grad.numpy(), c.grad.numpy()


def test_wt403_after_a_dynamic_loop_the_replay_sees_the_pre_loop_value():
    """``s = 1 + sum(a)`` (16) by a dynamic loop, then ``s * c``: c.grad is 1 (the pre-loop s),
    not 16; ``s * s`` gives a.grad 2, not 32."""
    a_grad, c_grad = _after_loop(sum_then_product)
    assert np.allclose(a_grad, 3.0) and c_grad[0] == pytest.approx(1.0)  # true c.grad: 16
    a_grad, _ = _after_loop(sum_then_square, with_c=False)
    assert np.allclose(a_grad, 2.0)  # true: 32


def test_wt403_linear_uses_after_the_loop_are_exact():
    """``out[0] = s`` and ``out[1] = 2 s`` never need the value: a.grad = 1 + 2."""
    a_grad, _ = _after_loop(sum_then_store, with_c=False, outputs=2)
    assert np.allclose(a_grad, 3.0)


def test_wt403_warp_replays_calls_not_loops():
    """The loop in a @wp.func returning the raw sum, squared in the caller: exact (32). The
    same square inside the function, after its loop: 2."""
    a_grad, _ = _after_loop(square_in_caller, with_c=False)
    assert np.allclose(a_grad, 32.0)
    a_grad, _ = _after_loop(square_in_func, with_c=False)
    assert np.allclose(a_grad, 2.0)  # true: 32


def test_wt403_unrolled_loops_are_exact_and_max_unroll_decides():
    """``range(5)`` is unrolled: c.grad 16. ``range(20)`` is dynamic under the default
    max_unroll (16): c.grad 1 instead of 61; with the module option max_unroll = 32 it is
    unrolled and exact."""
    a, c, out = _array(A), _array([3.0]), _array([0.0])
    _backward([lambda: wp.launch(unrolled_sum_then_product, 1, [a, c, out], device=DEVICE)], out)
    assert c.grad.numpy()[0] == pytest.approx(16.0)
    for kernel, expected in ((long_sum_then_product, 1.0), (long_sum_then_product_unrolled, 61.0)):
        a, c, out = _array(A), _array([3.0]), _array([0.0])
        args = [a, c, out]
        _backward([lambda kernel=kernel, args=args: wp.launch(kernel, 1, args, device=DEVICE)], out)
        assert c.grad.numpy()[0] == pytest.approx(expected)
        assert np.allclose(a.grad.numpy(), 12.0)  # 4 visits of each a[j], times c: exact either way


# ---------------------------------------------------------------- WT101-WT104: array overwrites


@wp.kernel
def sin_in_place(x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = wp.sin(x[i])


@wp.kernel
def read_then_add(y: wp.array(dtype=float), b: wp.array(dtype=float), loss: wp.array(dtype=float)):
    loss[0] = y[1] * b[0]
    b[0] += 100.0


@wp.kernel
def add_then_read(y: wp.array(dtype=float), b: wp.array(dtype=float), loss: wp.array(dtype=float)):
    b[0] += 100.0
    loss[0] = y[1] * b[0]


@wp.kernel
def tree_walk(parent: wp.array(dtype=int), angle: wp.array(dtype=float), pose: wp.array(dtype=float)):
    for i in range(angle.shape[0]):
        base = float(0.0)  # noqa: UP018 (a dynamic variable for Warp)
        if parent[i] >= 0:
            base = pose[parent[i]]
        pose[i] = wp.sin(base + angle[i])


@wp.kernel
def square_first(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    y[0] = x[0] * x[0]


@wp.kernel
def overwrite_first(x: wp.array(dtype=float)):
    x[0] = 10.0


def test_wt102_in_place_update_re_reads_the_new_value():
    """``x[i] = sin(x[i])`` at 0.5: cos(0.5) = 0.878; Warp evaluates cos(sin(0.5)) = 0.887."""
    (x_grad,) = _grad(sin_in_place, [[0.5]], out_index=0)
    assert x_grad[0] == pytest.approx(np.cos(np.sin(0.5)), rel=1e-5)


def test_wt102_additive_update_after_a_read_another_adjoint_needs():
    """``loss = y[1] * b[0]; b[0] += 100`` with b[0] = 10: y.grad[1] is 110, not 10. With the
    update first the forward pass reads 110 too, and 110 is right."""
    y_grad, _, _ = _grad(read_then_add, [[1.0, 2.0], [10.0, 5.0], [0.0]])
    assert y_grad[1] == pytest.approx(110.0)  # true: 10
    y_grad, _, _ = _grad(add_then_read, [[1.0, 2.0], [10.0, 5.0], [0.0]])
    assert y_grad[1] == pytest.approx(110.0)  # true: 110


def test_wt102_tree_walk_reading_the_parent_and_writing_the_child_is_exact():
    """One thread composes each link from its parent's entry (written earlier by the same
    thread): the elements read are never written afterwards, the gradient is exact."""
    parents = [-1, 0, 1]
    angles = np.array([0.3, -0.5, 0.8])
    parent = wp.array(parents, dtype=int, device=DEVICE)
    angle, pose = _array(angles), _array([0.0, 0.0, 0.0])
    _backward([lambda: wp.launch(tree_walk, 1, [parent, angle, pose], device=DEVICE)], pose)

    def total(a):
        out = np.zeros(3)
        for i, p in enumerate(parents):
            out[i] = np.sin((out[p] if p >= 0 else 0.0) + a[i])
        return out.sum()

    eps = 1e-6
    fd = [(total(angles + eps * e) - total(angles - eps * e)) / (2 * eps) for e in np.eye(3)]
    assert np.allclose(angle.grad.numpy(), fd, rtol=1e-4)


def test_wt101_wt103_a_later_write_changes_what_the_backward_reads():
    """``y = x^2`` at x = 3 (true gradient 6), then x overwritten with 10 before the backward:
    on the same tape (WT101), by an untaped launch or a memset (WT103): Warp gives 20."""

    def run(write):
        x, y = _array([3.0]), _array([0.0])
        tape = wp.Tape()
        with tape:
            wp.launch(square_first, 1, [x, y], device=DEVICE)
            if write == "taped":
                wp.launch(overwrite_first, 1, [x], device=DEVICE)
        if write == "untaped":
            wp.launch(overwrite_first, 1, [x], device=DEVICE)
        elif write == "memset":
            x.fill_(10.0)
        tape.backward(grads={y: wp.ones(1, dtype=float, device=DEVICE)})
        return x.grad.numpy()[0]

    assert run("none") == pytest.approx(6.0)
    for write in ("taped", "untaped", "memset"):
        assert run(write) == pytest.approx(20.0), write  # true: 6


# ---------------------------------------------------------------- WT404, WT405: custom adjoints and replays


@wp.func
def twice(x: float):
    return 2.0 * x


@wp.func_grad(twice)
def adj_twice(x: float, adj_ret: float):
    wp.adjoint[x] = 2.0 * adj_ret


@wp.kernel
def twice_plus_self(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    v = x[0]
    y[0] = twice(v) + v


@wp.func
def next_slot(counter: wp.array(dtype=int)):
    return wp.atomic_add(counter, 0, 1)


@wp.kernel
def scatter_to_slots(x: wp.array(dtype=float), counter: wp.array(dtype=int), y: wp.array(dtype=float)):
    i = wp.tid()
    slot = next_slot(counter)
    y[slot] = x[i] * float(i + 1)


def test_wt404_custom_adjoint_assignment_drops_other_uses():
    """``d/dx (twice(x) + x)`` is 3; a custom adjoint that assigns ``wp.adjoint[x] = ...``
    overwrites the 1 the other use contributed: 2."""
    x_grad, _ = _grad(twice_plus_self, [[1.0], [0.0]])
    assert x_grad[0] == pytest.approx(2.0)  # true: 3


def test_wt405_a_counter_in_a_function_runs_again_in_the_backward():
    """An atomic slot counter inside a @wp.func without @wp.func_replay: the backward replays
    the call, the counter ends at 6 (not 3) and the adjoints land on slots that do not exist."""
    x, y = _array([1.0, 1.0, 1.0]), _array([0.0, 0.0, 0.0])
    counter = wp.zeros(1, dtype=int, device=DEVICE)
    _backward(
        [lambda: wp.launch(scatter_to_slots, 3, [x, counter, y], device=DEVICE)], y, seed=[1.0, 10.0, 100.0]
    )
    assert counter.numpy()[0] == 6
    assert not np.allclose(x.grad.numpy(), [1.0, 20.0, 300.0])  # the true gradient


# ---------------------------------------------------------------- WT406-WT408: where, singular points, steps


@wp.kernel
def where_exp(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.where(x[i] > 0.0, x[i], wp.exp(100.0 * x[i]))


@wp.kernel
def if_exp(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    if x[i] > 0.0:
        y[i] = x[i]
    else:
        y[i] = wp.exp(100.0 * x[i])


@wp.kernel
def root(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    y[0] = wp.sqrt(x[0])


@wp.kernel
def stepped(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    y[0] = wp.floor(x[0]) * 2.0


def test_wt406_where_runs_the_adjoint_of_the_unselected_operand():
    """``wp.where(x > 0, x, exp(100 x))`` at x = 10: the unselected exp overflows, its adjoint
    gives inf * 0 = NaN; the same choice as an ``if`` gives 1."""
    x_grad, _ = _grad(where_exp, [[10.0], [0.0]])
    assert np.isnan(x_grad[0])
    x_grad, _ = _grad(if_exp, [[10.0], [0.0]])
    assert x_grad[0] == pytest.approx(1.0)


def test_wt407_sqrt_at_zero_has_an_infinite_adjoint():
    x_grad, _ = _grad(root, [[0.0], [0.0]])
    assert np.isinf(x_grad[0])


def test_wt408_step_functions_have_a_zero_derivative():
    """``floor`` is piecewise constant: the gradient is 0, which is the true derivative."""
    x_grad, _ = _grad(stepped, [[1.5], [0.0]])
    assert x_grad[0] == 0.0
