"""Warp kernels exercised by tests/test_kernel_facts.py.

Lines the tests check carry a ``# @tag`` comment; ``line_of(tag)`` finds them, so
editing this file does not break the expected line numbers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import warp as wp

wp.config.quiet = True

TILE = 8


def line_of(tag: str) -> int:
    """Absolute line number of the line ending in ``# @tag``."""
    for lineno, text in enumerate(Path(__file__).read_text().splitlines(), start=1):
        if text.rstrip().endswith(f"# @{tag}"):
            return lineno
    raise KeyError(tag)


@wp.struct
class Inner:
    q: wp.array(dtype=float)
    scale: float


@wp.struct
class State:
    q: wp.array(dtype=float)
    qd: wp.array(dtype=float)
    inner: Inner
    count: int


@wp.struct
class Body:
    mass: float
    pos: wp.vec3


# ---------------------------------------------------------------- plain accesses


@wp.kernel
def k_store(x: wp.array(dtype=float), y: wp.array(dtype=float), v: float):  # @k_store_def
    i = wp.tid()
    y[i] = v  # @k_store_y


@wp.kernel
def k_store_2d(x: wp.array2d(dtype=float), y: wp.array2d(dtype=float)):
    i, j = wp.tid()
    y[i, j] = x[i, j]  # @k_store_2d


@wp.kernel
def k_component(y: wp.array(dtype=wp.vec3), z: wp.array(dtype=wp.vec3), w: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    y[i].x = 1.0  # @k_component_attr
    z[i][0] = 2.0  # @k_component_index
    w[i].y += 1.0  # @k_component_acc


@wp.kernel
def k_accumulate(x: wp.array(dtype=float), y: wp.array(dtype=float), z: wp.array(dtype=float)):
    i = wp.tid()
    y[i] += x[i]  # @k_acc_add
    z[i] -= 1.0  # @k_acc_sub


@wp.kernel
def k_inplace(y: wp.array(dtype=float), z: wp.array(dtype=float)):
    i = wp.tid()
    y[i] *= 2.0  # @k_inplace_mul
    z[i] /= 2.0  # @k_inplace_div


@wp.kernel
def k_atomics(
    a: wp.array(dtype=float),
    b: wp.array(dtype=float),
    c: wp.array(dtype=float),
    d: wp.array(dtype=float),
    e: wp.array(dtype=int),
    f: wp.array(dtype=int),
    x: wp.array(dtype=float),
):
    i = wp.tid()
    wp.atomic_add(a, i, x[i])  # @k_atomic_add
    wp.atomic_sub(b, i, 1.0)  # @k_atomic_sub
    wp.atomic_min(c, 0, 1.0)
    wp.atomic_max(d, 0, 1.0)
    wp.atomic_cas(e, 0, 1, 2)
    wp.atomic_exch(f, 0, 3)


@wp.kernel
def k_counter(counter: wp.array(dtype=int), x: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    if x[i] > 0.0:  # @k_counter_read
        slot = wp.atomic_add(counter, 0, 1)  # @k_counter_atomic
        out[slot] = x[i]  # @k_counter_store


@wp.kernel
def k_binop_read(x: wp.array(dtype=float), u: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * 2.0  # @k_binop_left
    y[i] = y[i] + wp.sin(u[i])  # @k_binop_call


@wp.kernel
def k_metadata(x: wp.array(dtype=float), y: wp.array(dtype=float), z: wp.array(dtype=float)):
    i = wp.tid()
    n = wp.len(x) + y.shape[0]
    z[i] = float(n + wp.lower_bound(y, 0.5))  # @k_metadata_lower_bound


@wp.kernel
def k_tiles(x: wp.array2d(dtype=float), y: wp.array2d(dtype=float), z: wp.array2d(dtype=float)):
    i = wp.tid()
    t = wp.tile_load(x, shape=(TILE, TILE), offset=(i * TILE, 0))  # @k_tile_load
    wp.tile_store(y, t, offset=(i * TILE, 0))  # @k_tile_store
    wp.tile_atomic_add(z, t, offset=(0, 0))  # @k_tile_atomic


# ---------------------------------------------------------------- aliases and structs


@wp.kernel
def k_alias(state: State, x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    a = state.q
    b = x
    a[i] = b[i]  # @k_alias_store


@wp.kernel
def k_struct(state: State, v: float):
    i = wp.tid()
    state.q[i] = v  # @k_struct_q
    state.inner.q[i] = state.qd[i]  # @k_struct_inner


@wp.kernel
def k_array_of_struct(
    bodies: wp.array(dtype=Body), read_only: wp.array(dtype=Body), out: wp.array(dtype=float)
):
    i = wp.tid()
    bodies[i].mass = 1.0  # @k_aos_store
    out[i] = read_only[i].pos[0]  # @k_aos_read


@wp.kernel
def k_array_of_struct_with_arrays(items: wp.array(dtype=Inner), out: wp.array(dtype=float)):
    i = wp.tid()
    item = items[i]  # @k_aosa_read
    item.q[0] = out[i]  # @k_aosa_store


@wp.kernel
def k_views(x: wp.array2d(dtype=float), y: wp.array2d(dtype=float), v: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    row = y[i]
    row[0] = 1.0  # @k_view_store
    local = v[i]  # @k_view_copy
    local.y = 2.0
    xr = x[i]
    y[i, 1] = xr[0]  # @k_view_read


# ---------------------------------------------------------------- user functions


@wp.func
def store_at(a: wp.array(dtype=float), i: int, v: float):
    a[i] = v


@wp.func
def add_at(a: wp.array(dtype=float), i: int, v: float):
    wp.atomic_add(a, i, v)


@wp.func
def load_at(a: wp.array(dtype=float), i: int) -> float:
    return a[i]


@wp.func
def store_state(s: State, i: int):
    s.q[i] = s.qd[i] * 2.0


@wp.func
def nested_store(s: State, i: int):
    store_at(s.inner.q, i, 1.0)


@wp.func
def get_q(s: State) -> wp.array(dtype=float):
    return s.q


@wp.kernel
def k_callees(state: State, x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    store_at(state.qd, i, load_at(x, i))  # @k_call_field
    add_at(y, i, 1.0)  # @k_call_add
    store_state(state, i)  # @k_call_struct
    nested_store(state, i)  # @k_call_nested


k_ref = None
if hasattr(wp, "ref"):  # Warp >= 1.15

    @wp.func
    def set_ref(r: wp.ref[float], v: float):
        r = v  # noqa: F841 (a store through the reference)

    @wp.kernel(enable_backward=False)  # wp.ref parameters are forward-only
    def k_ref(x: wp.array(dtype=float), z: wp.array(dtype=float)):
        i = wp.tid()
        set_ref(z[i], x[i])  # @k_call_ref


@wp.kernel
def k_returned_alias(state: State):
    i = wp.tid()
    get_q(state)[i] = 1.0  # @k_returned_alias


WRITERS = (store_at, add_at)


@wp.kernel
def k_static(y: wp.array(dtype=float), z: wp.array(dtype=float)):
    i = wp.tid()
    wp.static(store_at)(y, i, 1.0)  # @k_static
    for k in range(wp.static(len(WRITERS))):
        wp.static(WRITERS[k])(z, i, 1.0)  # @k_static_loop


@wp.func
def overloaded(a: wp.array(dtype=float), i: int):
    a[i] = 1.0


@wp.func
def overloaded(a: wp.array(dtype=float), i: float):  # noqa: F811
    wp.atomic_add(a, int(i), 1.0)


@wp.kernel
def k_overloaded(y: wp.array(dtype=float)):
    i = wp.tid()
    overloaded(y, i)  # @k_overloaded


@wp.func
def scaled(x: float) -> float:
    return 2.0 * x


@wp.func_grad(scaled)
def adj_scaled(x: float, adj_ret: float):
    wp.adjoint[x] += 2.0 * adj_ret


@wp.func
def replayed(x: float) -> float:
    return x


@wp.func_replay(replayed)
def replay_replayed(x: float):
    return x


snippet = "out[tid] = inp[tid];"


@wp.func_native(snippet)
def native_copy(tid: int, inp: wp.array(dtype=float), out: wp.array(dtype=float)): ...


@wp.kernel
def k_custom(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = scaled(x[i]) + replayed(x[i])


@wp.kernel
def k_native(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    native_copy(i, x, y)  # @k_native


if hasattr(wp, "ref"):  # wp.ref parameters: warp-lang >= 1.15

    @wp.func_native("out = 2.0f * y;", adj_snippet="adj_y += 2.0f * adj_out; adj_out = 0.0f;")
    def native_store_ref(out: wp.ref[wp.float32], y: wp.float32): ...

    @wp.kernel
    def k_native_ref(x: wp.array(dtype=wp.float32), out: wp.array(dtype=wp.float32)):
        i = wp.tid()
        native_store_ref(out[i], x[i])  # @k_native_ref


@wp.kernel(enable_backward=False)
def k_no_backward(y: wp.array(dtype=float)):
    y[wp.tid()] = 0.0


# ---------------------------------------------------------------- generic and closures


@wp.kernel
def k_generic(x: wp.array(dtype=Any), y: wp.array(dtype=Any)):
    i = wp.tid()
    y[i] = x[i] + x[i]  # @k_generic


@wp.kernel
def k_generic_launched(x: wp.array(dtype=Any), y: wp.array(dtype=Any)):  # @k_generic_launched_def
    i = wp.tid()
    y[i] = x[i] * x[i]  # @k_generic_launched


def make_scale_kernel(factor: float):
    @wp.func
    def scale(v: float) -> float:
        return v * factor

    @wp.kernel
    def k_closure(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        store_at(y, i, scale(x[i]))  # @k_closure

    return k_closure


k_closure = make_scale_kernel(3.0)
