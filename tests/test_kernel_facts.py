"""Read/write facts of real Warp kernels (tests/kernels_for_facts.py), flag by flag and line by line."""

from __future__ import annotations

import ast
import copy
import dataclasses

import numpy as np
import pytest
import warp as wp

from tests import kernels_for_facts as K
from tests.kernels_for_facts import line_of
from warptrace.record import kernel_walk
from warptrace.record import kernels as facts_module
from warptrace.record.kernels import ArgFact, KernelFacts, kernel_facts

FILE = K.__file__


def row(facts: KernelFacts, name: str, field: str = "") -> ArgFact:
    matches = [a for a in facts.args if a.name == name and a.field == field]
    assert len(matches) == 1, (name, field, facts.args)
    return matches[0]


def flags(fact: ArgFact) -> str:
    """Compact R/S/A flags: read, store, accumulate ('.' when absent)."""
    return ("R" if fact.read else ".") + ("S" if fact.store else ".") + ("A" if fact.accumulate else ".")


def check(facts: KernelFacts, name: str, expected: str, *, write: str = "", read: str = "", field: str = ""):
    """Assert the flags of one row and, by tag, its first write and read lines (-1 when absent)."""
    fact = row(facts, name, field)
    assert flags(fact) == expected, (name, field, fact)
    assert fact.write == ("S" in expected or "A" in expected)
    assert fact.write_line == (line_of(write) if write else -1), (name, field, fact)
    assert fact.read_line == (line_of(read) if read else -1), (name, field, fact)


# ---------------------------------------------------------------- kernel-level facts


def test_kernel_identity():
    facts = kernel_facts(K.k_store)
    assert facts.analysis == "ast"
    assert facts.key == K.k_store.key
    assert facts.module == K.k_store.module.name
    assert facts.file == FILE
    assert facts.line == line_of("k_store_def")
    assert facts.source.lstrip().startswith("@wp.kernel")
    assert "y[i] = v" in facts.source
    assert facts.enable_backward is True
    assert (facts.custom_grad, facts.custom_replay, facts.native_snippets) == ((), (), False)


def test_rows_one_per_argument_and_array_field():
    facts = kernel_facts(K.k_struct)
    assert [(a.index, a.name, a.field, a.is_array) for a in facts.args] == [
        (0, "state", "", False),
        (0, "state", "q", True),
        (0, "state", "qd", True),
        (0, "state", "inner.q", True),
        (1, "v", "", False),
    ]
    assert row(facts, "state").type == "State"
    assert row(facts, "state", "inner.q").type == "array(dtype=float32, ndim=1)"
    assert row(facts, "v").type == "float32"
    assert [a.field for a in facts.arg_facts(0)] == ["", "q", "qd", "inner.q"]
    assert facts.arg_facts(1) == (row(facts, "v"),)
    assert [f.name for f in dataclasses.fields(KernelFacts)][-1] == "args"
    assert facts.arg_facts(7) == ()
    # non-array rows carry no access flags
    assert flags(row(facts, "state")) == "..." and flags(row(facts, "v")) == "..."


def test_enable_backward_option():
    assert kernel_facts(K.k_no_backward).enable_backward is False


# ---------------------------------------------------------------- stores, accumulations, reads


def test_plain_store():
    facts = kernel_facts(K.k_store)
    check(facts, "y", ".S.", write="k_store_y")
    check(facts, "x", "...")
    assert row(facts, "y").type == "array(dtype=float32, ndim=1)"


def test_multi_dim_store():
    facts = kernel_facts(K.k_store_2d)
    check(facts, "y", ".S.", write="k_store_2d")
    check(facts, "x", "R..", read="k_store_2d")
    assert row(facts, "x").type == "array(dtype=float32, ndim=2)"


def test_component_store_and_accumulate():
    facts = kernel_facts(K.k_component)
    check(facts, "y", ".S.", write="k_component_attr")
    check(facts, "z", ".S.", write="k_component_index")
    check(facts, "w", "..A", write="k_component_acc")


def test_augmented_add_sub_accumulate_without_read():
    facts = kernel_facts(K.k_accumulate)
    check(facts, "y", "..A", write="k_acc_add")
    check(facts, "z", "..A", write="k_acc_sub")
    check(facts, "x", "R..", read="k_acc_add")


def test_augmented_mul_div_read_and_store():
    facts = kernel_facts(K.k_inplace)
    check(facts, "y", "RS.", write="k_inplace_mul", read="k_inplace_mul")
    check(facts, "z", "RS.", write="k_inplace_div", read="k_inplace_div")


def test_atomics_accumulate():
    facts = kernel_facts(K.k_atomics)
    check(facts, "a", "..A", write="k_atomic_add")
    check(facts, "b", "..A", write="k_atomic_sub")
    for name in "cdef":
        fact = row(facts, name)
        assert flags(fact) == "..A", fact
    check(facts, "x", "R..", read="k_atomic_add")


def test_atomic_used_as_counter_is_accumulate():
    facts = kernel_facts(K.k_counter)
    check(facts, "counter", "..A", write="k_counter_atomic")
    check(facts, "out", ".S.", write="k_counter_store")
    check(facts, "x", "R..", read="k_counter_read")


def test_read_in_left_operand_and_inside_call():
    facts = kernel_facts(K.k_binop_read)
    check(facts, "x", "R..", read="k_binop_left")
    check(facts, "u", "R..", read="k_binop_call")
    check(facts, "y", "RS.", write="k_binop_left", read="k_binop_call")


def test_len_and_shape_are_not_reads_unknown_builtin_reads():
    facts = kernel_facts(K.k_metadata)
    check(facts, "x", "...")
    check(facts, "y", "R..", read="k_metadata_lower_bound")
    check(facts, "z", ".S.", write="k_metadata_lower_bound")


def test_tiles():
    facts = kernel_facts(K.k_tiles)
    check(facts, "x", "R..", read="k_tile_load")
    check(facts, "y", ".S.", write="k_tile_store")
    check(facts, "z", "..A", write="k_tile_atomic")


# ---------------------------------------------------------------- aliases and structs


def test_local_aliases():
    facts = kernel_facts(K.k_alias)
    check(facts, "state", ".S.", field="q", write="k_alias_store")
    check(facts, "x", "R..", read="k_alias_store")
    check(facts, "y", "...")
    check(facts, "state", "...", field="qd")


def test_struct_fields_and_nested_struct():
    facts = kernel_facts(K.k_struct)
    check(facts, "state", ".S.", field="q", write="k_struct_q")
    check(facts, "state", ".S.", field="inner.q", write="k_struct_inner")
    check(facts, "state", "R..", field="qd", read="k_struct_inner")


def test_array_of_structs():
    facts = kernel_facts(K.k_array_of_struct)
    check(facts, "bodies", ".S.", write="k_aos_store")
    check(facts, "read_only", "R..", read="k_aos_read")
    check(facts, "out", ".S.", write="k_aos_read")


def test_arrays_inside_array_elements_are_attributed_to_the_outer_array():
    # item.q points at memory we cannot follow: the write is charged to items (opaque)
    facts = kernel_facts(K.k_array_of_struct_with_arrays)
    check(facts, "items", "RS.", write="k_aosa_store", read="k_aosa_read")
    check(facts, "out", "R..", read="k_aosa_store")


def test_views_write_and_element_copies_do_not():
    facts = kernel_facts(K.k_views)
    check(facts, "y", ".S.", write="k_view_store")  # row = y[i]; row[0] = ...
    check(facts, "v", "R..", read="k_view_copy")  # local = v[i]; local.y = ... is local
    check(facts, "x", "R..", read="k_view_read")  # xr = x[i] is a view, xr[0] the read


# ---------------------------------------------------------------- user functions


def test_writes_in_callees_map_to_caller_arguments_and_fields():
    facts = kernel_facts(K.k_callees)
    # store_at(state.qd, ...) and the read in store_state(state, ...)
    check(facts, "state", "RS.", field="qd", write="k_call_field", read="k_call_struct")
    check(facts, "x", "R..", read="k_call_field")  # load_at(x, i)
    check(facts, "y", "..A", write="k_call_add")  # add_at -> atomic_add
    check(facts, "state", ".S.", field="q", write="k_call_struct")  # whole struct passed
    check(facts, "state", ".S.", field="inner.q", write="k_call_nested")  # two levels down


@pytest.mark.skipif(K.k_ref is None, reason="wp.ref needs Warp >= 1.15")
def test_store_through_ref_parameter():
    assert kernel_facts(K.k_ref).enable_backward is False
    facts = kernel_facts(K.k_ref)
    check(facts, "z", ".S.", write="k_call_ref")
    check(facts, "x", "R..", read="k_call_ref")


def test_array_returned_by_callee_is_an_alias():
    facts = kernel_facts(K.k_returned_alias)
    check(facts, "state", ".S.", field="q", write="k_returned_alias")


def test_overloaded_function_is_the_union_of_its_overloads():
    facts = kernel_facts(K.k_overloaded)
    check(facts, "y", ".SA", write="k_overloaded")


def test_static_callees():
    facts = kernel_facts(K.k_static)
    check(facts, "y", ".S.", write="k_static")
    # wp.static(WRITERS[k]) depends on the loop variable: every candidate counts
    check(facts, "z", ".SA", write="k_static_loop")


def test_closure_functions():
    facts = kernel_facts(K.k_closure)
    check(facts, "x", "R..", read="k_closure")
    check(facts, "y", ".S.", write="k_closure")


def test_custom_adjoints_and_native_snippets():
    facts = kernel_facts(K.k_custom)
    assert facts.custom_grad == ("scaled",)
    assert facts.custom_replay == ("replayed",)
    assert facts.native_snippets is False
    native = kernel_facts(K.k_native)
    assert native.native_snippets is True
    # what native code does is unknown: arrays it receives are read and overwritten
    check(native, "x", "RS.", write="k_native", read="k_native")
    check(native, "y", "RS.", write="k_native", read="k_native")
    # ... a guess, marked opaque (the recorder flags it uncertain: never an error)
    assert row(native, "x").opaque and row(native, "y").opaque


@pytest.mark.skipif(not hasattr(K, "k_native_ref"), reason="wp.ref needs warp-lang >= 1.15")
def test_native_snippet_signature_narrows_the_guess():
    facts = kernel_facts(K.k_native_ref)
    # x[i] goes to a value parameter: loaded at the call, a proven read and nothing else
    check(facts, "x", "R..", read="k_native_ref")
    assert not row(facts, "x").opaque
    # out[i] goes to a wp.ref parameter: the snippet may read and overwrite it (opaque)
    check(facts, "out", "RS.", write="k_native_ref", read="k_native_ref")
    assert row(facts, "out").opaque


# ---------------------------------------------------------------- generic kernels and cache


def test_generic_kernel_analyses_the_launched_overload():
    xf = wp.zeros(4, dtype=float, device="cpu")
    yf = wp.zeros(4, dtype=float, device="cpu")
    xv = wp.zeros(4, dtype=wp.vec3, device="cpu")
    yv = wp.zeros(4, dtype=wp.vec3, device="cpu")
    floats = kernel_facts(K.k_generic, [xf, yf])
    vecs = kernel_facts(K.k_generic, [xv, yv])
    assert row(floats, "x").type == "array(dtype=float32, ndim=1)"
    assert row(vecs, "x").type == "array(dtype=vec3f, ndim=1)"
    for facts in (floats, vecs):
        check(facts, "x", "R..", read="k_generic")
        check(facts, "y", ".S.", write="k_generic")
    assert kernel_facts(K.k_generic, [xf, yf]) is floats
    # without arguments: the template (dtype Any), still analysed
    template = kernel_facts(K.k_generic)
    assert row(template, "y").type == "array(dtype=Any, ndim=1)"
    check(template, "y", ".S.", write="k_generic")
    # a registered overload object is a plain kernel
    overload = K.k_generic.add_overload([wp.array(dtype=wp.float64), wp.array(dtype=wp.float64)])
    assert row(kernel_facts(overload), "x").type == "array(dtype=float64, ndim=1)"
    assert kernel_facts(K.k_generic, [wp.zeros(2, dtype=wp.float64), wp.zeros(2, dtype=wp.float64)]) is (
        kernel_facts(overload)
    )


def test_generic_overload_made_by_a_launch_has_file_lines():
    """Facts taken after Warp made the overload (the launch comes first) name lines of the
    file: an overload's ``fun_lineno`` is 0, its lines are the template's."""
    x = wp.zeros(4, dtype=wp.float64, device="cpu")
    y = wp.zeros(4, dtype=wp.float64, device="cpu")
    wp.launch(K.k_generic_launched, dim=4, inputs=[x, y], device="cpu")
    facts = kernel_facts(K.k_generic_launched, [x, y])
    assert facts.line == line_of("k_generic_launched_def")
    check(facts, "x", "R..", read="k_generic_launched")
    check(facts, "y", ".S.", write="k_generic_launched")


def test_cache_hit_returns_the_same_facts():
    """The cost of a hit and of a first analysis is measured by ``tools/bench_kernel_facts.py``."""
    first = kernel_facts(K.k_callees)
    assert kernel_facts(K.k_callees) is first


def test_analysis_leaves_warp_untouched():
    module = K.k_store.module
    hash_before = module.hash_module() if hasattr(module, "hash_module") else None
    flag_before = wp.config.verify_autograd_array_access
    kernels = [k for k in vars(K).values() if isinstance(k, wp.Kernel)]
    for cache in (facts_module._BY_KERNEL, facts_module._BY_SIGNATURE, kernel_walk.SUMMARIES):
        cache.clear()
    facts_module._BY_GENERIC_ARGS.clear()
    for kernel in kernels:
        assert kernel_facts(kernel).analysis == "ast"
    assert wp.config.verify_autograd_array_access == flag_before
    if hash_before is not None:
        assert module.hash_module() == hash_before


def test_failed_analysis_is_conservative_and_never_raises():
    broken = copy.copy(K.k_struct)
    broken.adj = copy.copy(K.k_struct.adj)
    broken.adj.tree = ast.parse("x = 1")  # no function definition to walk
    facts = kernel_facts(broken)
    assert facts.analysis.startswith("failed: ")
    assert facts.key == K.k_struct.key
    for fact in facts.args:
        if fact.is_array:
            assert (fact.read, fact.write, fact.store, fact.accumulate) == (True, True, True, False)
        else:
            assert flags(fact) == "..."
    assert [a.field for a in facts.arg_facts(0)] == ["", "q", "qd", "inner.q"]
    assert kernel_facts(broken) is facts

    for nonsense in (object(), [], None):
        nothing = kernel_facts(nonsense)
        assert nothing.analysis.startswith("failed: ")
        assert nothing.args == ()


@pytest.mark.parametrize("kernel", [K.k_store, K.k_callees, K.k_views, K.k_struct])
def test_facts_agree_with_execution(kernel):
    """What the facts call a write really changes memory, and nothing else does (CPU run)."""
    facts = kernel_facts(kernel)
    n = 4
    inputs = []
    arrays = {}

    def fresh(shape, dtype):
        base = 10.0 * (len(arrays) + 1)
        data = base + np.arange(int(np.prod(shape)) * (3 if dtype is wp.vec3 else 1), dtype=np.float32)
        return wp.array(data.reshape(shape + ((3,) if dtype is wp.vec3 else ())), dtype=dtype, device="cpu")

    for arg in kernel.adj.args:
        t = arg.type
        if hasattr(t, "ndim"):
            arrays[(arg.label, "")] = value = fresh((n,) * t.ndim, t.dtype)
            inputs.append(value)
        elif t is K.State:
            state = K.State()
            state.q = arrays[(arg.label, "q")] = fresh((n,), float)
            state.qd = arrays[(arg.label, "qd")] = fresh((n,), float)
            inner = K.Inner()
            inner.q = arrays[(arg.label, "inner.q")] = fresh((n,), float)
            state.inner = inner
            inputs.append(state)
        else:
            inputs.append(7.0)
    before = {key: value.numpy().copy() for key, value in arrays.items()}
    wp.launch(kernel, dim=n, inputs=inputs, device="cpu")
    for (name, field), value in arrays.items():
        changed = not np.array_equal(before[(name, field)], value.numpy())
        assert changed == row(facts, name, field).write, (name, field)
