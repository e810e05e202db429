"""Warp kernels exercised by tests/test_kernel_source.py (the kernel-source model).

Lines the tests check carry a ``# @tag`` comment; ``line_of(tag)`` finds them.
"""

from __future__ import annotations

from pathlib import Path

import warp as wp

wp.config.quiet = True

N = 4


def line_of(tag: str) -> int:
    """Absolute line number of the line ending in ``# @tag``."""
    for lineno, text in enumerate(Path(__file__).read_text().splitlines(), start=1):
        if text.rstrip().endswith(f"# @{tag}"):
            return lineno
    raise KeyError(tag)


@wp.kernel
def k_loops(x: wp.array(dtype=float), y: wp.array(dtype=float), n: int):
    i = wp.tid()
    p = float(1.0)  # noqa: UP018 (a dynamic variable for Warp)
    for k in range(4):  # @static_loop
        p *= x[k]  # @local_mul
    s = float(0.0)  # noqa: UP018
    for k in range(n):  # @dynamic_loop
        s += x[k]  # @local_add
        for j in range(1, 7, 2):  # @nested_loop
            s += x[j]
    while s > 10.0:  # @while_loop
        s = s - 1.0
    y[i] = p + s


@wp.kernel
def k_inplace(a: wp.array(dtype=float), v: wp.array(dtype=wp.vec3), s: float):
    i = wp.tid()
    a[i] *= s  # @array_mul
    a[i] /= s  # @array_div
    v[i].x -= s  # @array_component_sub
    a[i] += s  # @array_add


@wp.kernel
def k_components(out: wp.array(dtype=wp.vec3), m_out: wp.array(dtype=wp.mat22), s: float):
    i = wp.tid()
    v = wp.vec3()
    v[1] = s  # @component_index
    v[1] = 2.0 * s  # @component_index_again
    v.x = s  # @component_attr
    v[2] += s  # @component_add
    m = wp.mat22()
    m[0, 1] = s  # @matrix_component
    out[i] = v
    m_out[i] = m


@wp.kernel
def k_array_views(
    y: wp.array2d(dtype=float), g: wp.array(dtype=float, ndim=2), p: wp.array(dtype=wp.vec3), s: float
):
    i = wp.tid()
    top = y[0:1, :]
    top[0, i] = s  # @view_store
    row = g[1]
    row[i] *= s  # @subarray_mul
    alias = row
    alias[i] = s  # @alias_store
    v = p[i]
    v[0] = s  # @element_component
    p[i] = v


@wp.kernel
def k_selects(z: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    a = wp.where(z[i] > 0.0, wp.exp(z[i]), 0.0)  # @where
    b = z[i] if z[i] > 1.0 else wp.sqrt(z[i])  # @ifexp
    c = wp.select(z[i] < 0.0, z[i], wp.log(z[i]))  # @select
    out[i] = a + b + c + wp.floor(z[i]) + float(int(z[i]))  # @piecewise
    out[i] /= z[i] - 1.0  # @div_aug
    out[i] = out[i] / wp.length(wp.vec2(z[i], 1.0))  # @div


@wp.func
def twice(x: float) -> float:
    return 2.0 * x


@wp.func_grad(twice)
def adj_twice(x: float, adj_ret: float):
    wp.adjoint[x] = 2.0 * adj_ret  # @adjoint_assign


@wp.func
def thrice(x: float) -> float:
    return 3.0 * x


@wp.func_grad(thrice)
def adj_thrice(x: float, adj_ret: float):
    wp.adjoint[x] += 3.0 * adj_ret  # @adjoint_accumulate


# Not `take_slot`: the zoo's ok_src_replay has a @wp.func of that name with a @wp.func_replay,
# and Warp names a replay function by a counter of its own key ("replay_take_slot_0") while
# calls to it use the forward function's ("replay_" + "take_slot_1" once another take_slot
# exists in the process): that module then fails to compile (Warp 1.19, any process that
# defines both).
@wp.func
def next_free_slot(counter: wp.array(dtype=int)) -> int:
    return wp.atomic_add(counter, 0, 1)  # @atomic_in_func


@wp.kernel
def k_custom_and_atomics(
    x: wp.array(dtype=float),
    counter: wp.array(dtype=int),
    total: wp.array(dtype=float),
    out: wp.array(dtype=float),
):
    i = wp.tid()
    slot = wp.atomic_add(counter, 0, 1)  # @atomic_used
    wp.atomic_add(total, 0, x[i])  # @atomic_discarded
    out[slot] = twice(x[i]) + thrice(x[i])  # @calls_custom
    out[next_free_slot(counter)] = x[i]


# ---------------------------------------------------------------- model v2: loops, components, guards

COUNT = wp.constant(3)
MANY = wp.constant(20)


@wp.func
def f_recur(y0: float, n: int):
    y = y0
    for _k in range(n):  # @func_dynamic
        y = wp.sin(y)  # @func_recur
    return y


@wp.kernel
def k_unroll(x: wp.array(dtype=float), out: wp.array(dtype=float), n: int):
    p = float(1.0)  # noqa: UP018
    for k in range(COUNT):  # @constant_loop
        p *= x[k]
    q = float(1.0)  # noqa: UP018
    for k in range(MANY):  # @many_loop
        q = q * x[k]  # @many_mul
    s = float(0.0)  # noqa: UP018
    for k in range(n):  # @accumulate_loop
        s += x[k] * x[k]
        t = x[k] * 2.0
        s = s - t
    for k in range(3):  # @break_loop
        if x[k] > 1.0:
            break
    out[0] = p + q + s + f_recur(x[0], n)


@wp.kernel
def k_history(x: wp.array(dtype=float), out: wp.array(dtype=float), n: int):
    i = wp.tid()
    v = wp.vec3(x[i], 0.0, 0.0)
    r = v[0] * 2.0
    v[1] = x[i]  # @other_component
    v[0] = x[i] * x[i]  # @after_read
    w = wp.vec3(0.0)
    if x[i] > 0.0:
        w[0] = x[i]  # @branch_a
    else:
        w[0] = -x[i]  # @branch_b
    for k in range(3):
        w[k] += x[i]
    u = wp.vec3(0.0)
    for k in range(n):
        u[2] = x[k]  # @loop_repeat
    p = wp.vec3(x[i], x[i], 0.0)
    if p[1] < 0.0:
        p[1] = 0.0  # @clamp
    out[i] = v[0] + v[1] + r + w[0] + u[2] + p[1]


@wp.kernel
def k_guards(x: wp.array(dtype=float), out: wp.array(dtype=float), eps: float):
    i = wp.tid()
    z = x[i]
    if z < 0.0:
        return
    a = wp.sqrt(z)  # @after_return
    b = wp.sqrt(z + eps)  # @plus_eps
    c = wp.sqrt(wp.max(z, 1.0e-6))  # @max_guard
    safe = wp.where(z > 0.0, z, 1.0)
    d = wp.where(z > 0.0, wp.log(safe), 0.0)  # @double_where
    e = wp.where(z > 1.0, z, wp.exp(z))  # @exp_where
    f = wp.where(z > 1.0, z, wp.exp(wp.min(z, 10.0)))  # @exp_clamped
    g = float(z > 0.5)  # @compare_value
    out[i] = a + b + c + d + e + f + g


@wp.kernel
def k_vector_sum(rays: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3), n: int):
    color = wp.vec3(0.0, 0.0, 0.0)
    for k in range(n):  # @vector_sum_loop
        ray = rays[k]
        color = wp.vec3(color[0] + ray[0], color[1] + ray[1], color[2] + ray[2])
    out[0] = color


@wp.func
def f_square_after_loop(x: wp.array(dtype=float), n: int):
    s = float(0.0)  # noqa: UP018
    for k in range(n):
        s += x[k]
    return s * s  # @func_after_loop


@wp.func
def f_raw_sum(x: wp.array(dtype=float), n: int):
    s = float(0.0)  # noqa: UP018
    for k in range(n):
        s += x[k]
    return s


@wp.kernel
def k_after_loop(
    x: wp.array(dtype=float),
    c: wp.array(dtype=float),
    opt: wp.array(dtype=float),
    out: wp.array(dtype=float),
    n: int,
):
    s = float(1.0)  # noqa: UP018
    norm = float(0.0)  # noqa: UP018
    for k in range(n):  # @after_dynamic
        s += x[k]
        norm += x[k] * x[k]
    out[0] = s
    out[1] = s * 2.0
    out[2] = s * c[0]  # @stale_product
    out[3] = s / norm  # @stale_divide
    m = s * 0.5
    out[4] = wp.sqrt(m)  # @stale_sqrt
    if norm > 1.0:  # @stale_branch
        out[5] = x[0]
    t = f_raw_sum(x, n)
    out[6] = t * t + f_square_after_loop(x, n)
    u = x[0]
    if opt:
        for k in range(n):
            u += opt[k]
    out[7] = u * u  # @guarded_use
    v = x[1]
    for k in range(COUNT):
        v += x[k]
    out[8] = v * v
    s = x[2]
    out[9] = s * s
