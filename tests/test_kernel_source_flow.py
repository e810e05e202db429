"""Model v2 of the kernel source: which loops Warp unrolls, the state a dynamic loop carries,
the history of local vector components, guards and hazards, and which kernel arguments a
value depends on (through @wp.func call sites). Real Warp kernels, recorded facts."""

from __future__ import annotations

import warp as wp

from tests import kernels_for_source as K
from tests.kernels_for_source import N, line_of
from warptrace.kernel_source import KernelSource
from warptrace.record.kernels import kernel_facts


def model(kernel) -> KernelSource:
    stored = KernelSource.from_json(kernel_facts(kernel).source_model)
    assert stored is not None
    return stored


def test_unrolling_follows_warp_constants_max_unroll_and_break():
    loops = {loop.line: loop for loop in model(K.k_unroll).kernel.loops}
    constant = loops[line_of("constant_loop")]
    assert (constant.trip_count, constant.unrolled) == (3, True)
    many = loops[line_of("many_loop")]
    assert (many.trip_count, many.unrolled) == (20, False)  # beyond the default max_unroll of 16
    assert not loops[line_of("accumulate_loop")].unrolled
    assert not loops[line_of("break_loop")].unrolled


def test_dynamic_loops_carry_products_and_recurrences_not_sums():
    source = model(K.k_unroll)
    loops = {loop.line: loop for loop in source.kernel.loops}
    assert loops[line_of("many_loop")].carried == ("q",)
    assert loops[line_of("many_loop")].carried_lines == (line_of("many_mul"),)
    assert loops[line_of("accumulate_loop")].carried == ()  # s += ..., s = s - t: additive
    recur = next(f for f in source.functions if f.name == "f_recur")
    assert [(loop.carried, loop.carried_lines) for loop in recur.loops] == [
        (("y",), (line_of("func_recur"),))
    ]


def test_component_history():
    found = {
        c.line: (c.previous, c.previous_line, c.previous_names)
        for c in model(K.k_history).kernel.component_assigns
        if c.op == "="
    }
    init = line_of("other_component") - 2  # v = wp.vec3(x[i], 0.0, 0.0)
    assert found[line_of("other_component")] == ("", -1, ())  # overwrites the constant 0.0
    assert found[line_of("after_read")] == ("initialized", init, ("i", "x"))
    assert found[line_of("branch_a")] == ("", -1, ())
    assert found[line_of("branch_b")] == ("", -1, ())  # exclusive branches, constant before
    assert found[line_of("loop_repeat")] == ("assigned", line_of("loop_repeat"), ("k", "x"))
    assert found[line_of("clamp")] == ("initialized", line_of("clamp") - 2, ("i", "x"))


def test_guards_and_hazards():
    kernel = model(K.k_guards).kernel
    sqrt = {c.line: c for c in kernel.calls if c.name == "sqrt"}
    assert "z" in sqrt[line_of("after_return")].guards
    assert sqrt[line_of("plus_eps")].arg_guarded
    assert sqrt[line_of("max_guard")].arg_guarded
    hazards = {s.line: s.hazards for s in kernel.selects}
    assert hazards[line_of("double_where")] == ((), ())
    assert hazards[line_of("exp_where")] == ((), ("exp",))
    assert hazards[line_of("exp_clamped")] == ((), ())
    values = {c.line: c.as_value for c in kernel.comparisons}
    assert values[line_of("compare_value")] is True
    assert values[line_of("double_where")] is False


def test_values_depend_on_kernel_arguments_through_calls():
    source = model(K.k_unroll)
    recur = next(f for f in source.functions if f.name == "f_recur")
    assert source.kernel_args(recur, ["y"]) == frozenset({"x"})
    assert source.kernel_args(source.kernel, ["q"]) == frozenset({"x"})
    assert source.kernel_args(source.kernel, ["n"]) == frozenset({"n"})


def test_componentwise_vector_sum_is_additive():
    # Warp's example_diffray accumulates a color component by component through the constructor
    loops = {loop.line: loop for loop in model(K.k_vector_sum).kernel.loops}
    assert loops[line_of("vector_sum_loop")].carried == ()


def test_stale_reads_after_a_dynamic_loop():
    source = model(K.k_after_loop)
    reads = {(r.line, r.kind): r for r in source.kernel.stale_reads}
    loop = line_of("after_dynamic")
    product = reads[(line_of("stale_product"), "value")]
    assert (product.loop, product.names, product.needs) == (loop, ("s",), ("c",))
    assert reads[(line_of("stale_divide"), "value")].needs == ("norm", "s")
    assert reads[(line_of("stale_sqrt"), "value")].names == ("m",)  # computed after the loop from s
    assert reads[(line_of("stale_branch"), "branch")].needs == ("out", "x")
    assert reads[(line_of("guarded_use"), "value")].guards == ("opt",)
    # stores, constant scalings, replayed calls, unrolled loops and recomputed locals: nothing
    assert set(reads) == {
        (line_of(tag), kind)
        for tag, kind in (
            ("stale_product", "value"),
            ("stale_divide", "value"),
            ("stale_sqrt", "value"),
            ("stale_branch", "branch"),
            ("guarded_use", "value"),
        )
    }
    assert source.kernel_args(source.kernel, product.needs) == frozenset({"c"})
    func = next(f for f in source.functions if f.name == "f_square_after_loop")
    assert [(r.line, r.needs) for r in func.stale_reads] == [(line_of("func_after_loop"), ("s",))]
    raw = next(f for f in source.functions if f.name == "f_raw_sum")
    assert raw.stale_reads == ()


def test_static_bounds_are_unrolled():
    @wp.kernel
    def k_static_bounds(x: wp.array(dtype=float), out: wp.array(dtype=float)):
        u = float(0.0)  # noqa: UP018
        for k in range(wp.static(2 * N)):
            u += x[k % N]
        out[0] = u * u

    loops = model(k_static_bounds).kernel.loops
    assert [loop.unrolled for loop in loops] == [True]
    assert model(k_static_bounds).kernel.stale_reads == ()
