"""The kernel-source model (warptrace.kernel_source) on real Warp kernels: the answers the
kernel-source rules (WT401-WT408) build on, the JSON round trip, and the recorder's copy."""

from __future__ import annotations

import ast
import dataclasses
import json
import sys
from pathlib import Path

import pytest

from tests import kernels_for_source as K
from tests.kernels_for_source import line_of
from warptrace.kernel_source import FUNC, FUNC_GRAD, KernelSource, parse_function
from warptrace.kernel_source.local_flow import array_annotation_ndim
from warptrace.record.kernels import kernel_facts

FILE = K.__file__


def model(kernel) -> KernelSource:
    stored = KernelSource.from_json(kernel_facts(kernel).source_model)
    assert stored is not None
    return stored


def test_loops_static_and_dynamic():
    loops = {loop.line: loop for loop in model(K.k_loops).kernel.loops}
    static, dynamic = loops[line_of("static_loop")], loops[line_of("dynamic_loop")]
    assert (static.kind, static.target, static.bounds, static.trip_count) == ("for", "k", ("4",), 4)
    assert static.assigned == ("p",) and static.parent == -1
    assert (dynamic.bounds, dynamic.trip_count) == (("n",), None)
    assert dynamic.end_line == line_of("nested_loop") + 1
    nested = loops[line_of("nested_loop")]
    assert (nested.trip_count, nested.parent) == (3, line_of("dynamic_loop"))
    assert (loops[line_of("while_loop")].kind, loops[line_of("while_loop")].trip_count) == ("while", None)


def test_statements_know_their_loop():
    statements = {(s.line, s.kind): s for s in model(K.k_loops).kernel.statements}
    assert statements[(line_of("local_mul"), "AugAssign")].loop == line_of("static_loop")
    assert statements[(line_of("local_add"), "AugAssign")].loop == line_of("dynamic_loop")
    assert statements[(line_of("static_loop"), "For")].loop == -1


def test_augmented_assignments_on_locals_and_array_elements():
    local = {(a.line, a.op, a.target, a.target_kind, a.loop) for a in model(K.k_loops).kernel.aug_assigns}
    assert (line_of("local_mul"), "*=", "p", "local", line_of("static_loop")) in local
    assert (line_of("local_add"), "+=", "s", "local", line_of("dynamic_loop")) in local
    array = [(a.line, a.op, a.target, a.target_kind, a.root) for a in model(K.k_inplace).kernel.aug_assigns]
    assert array == [
        (line_of("array_mul"), "*=", "a[i]", "array", "a"),
        (line_of("array_div"), "/=", "a[i]", "array", "a"),
        (line_of("array_component_sub"), "-=", "v[i].x", "array", "v"),
        (line_of("array_add"), "+=", "a[i]", "array", "a"),
    ]
    assert model(K.k_inplace).kernel.array_params == ("a", "v")


def test_component_assignments_of_local_vectors_and_matrices():
    found = [(c.line, c.local, c.component, c.op) for c in model(K.k_components).kernel.component_assigns]
    assert found == [
        (line_of("component_index"), "v", "[1]", "="),
        (line_of("component_index_again"), "v", "[1]", "="),
        (line_of("component_attr"), "v", ".x", "="),
        (line_of("component_add"), "v", "[2]", "+="),
        (line_of("matrix_component"), "m", "[0, 1]", "="),
    ]
    # array element stores are not local components
    assert all(c.local not in ("out", "m_out") for c in model(K.k_components).kernel.component_assigns)


def test_stores_into_array_views_are_array_stores_not_components():
    kernel = model(K.k_array_views).kernel
    # a slice, a sub-array (fewer indices than dimensions) and an alias of one are arrays;
    # an element of a 1-d array of vectors is a local vector
    found = [(c.line, c.local, c.component) for c in kernel.component_assigns]
    assert found == [(line_of("element_component"), "v", "[0]")]
    aug = [(a.line, a.target, a.target_kind, a.root) for a in kernel.aug_assigns]
    assert aug == [(line_of("subarray_mul"), "row[i]", "array", "row")]
    assert kernel.array_params == ("g", "p", "y")


def test_version_2_model_is_upgraded_to_array_aliases():
    # what version 2 stored for k_array_views: the view stores as components of locals
    current = model(K.k_array_views)
    data = json.loads(current.to_json())
    data["version"] = 2
    kernel = data["kernel"]
    kernel["array_params"] = ["g", "p"]
    kernel["component_assigns"].insert(
        0, {"line": line_of("view_store"), "local": "top", "component": "[0, i]", "op": "=", "loop": -1}
    )
    kernel["aug_assigns"][0]["target_kind"] = "component"
    assert KernelSource.from_json(json.dumps(data)) == current


@pytest.mark.parametrize(
    ("annotation", "ndim"),
    [
        ("wp.array(dtype=float)", 1),
        ("wp.array(dtype=float, ndim=3)", 3),
        ("wp.array2d(dtype=float)", 2),
        ("wp.array3d[float]", 3),
        ("wp.array[float]", 0),
        ("wp.indexedarray2d(dtype=float)", 2),
        ("wp.vec3", None),
        ("float", None),
    ],
)
def test_array_annotation_dimensions(annotation, ndim):
    assert array_annotation_ndim(ast.parse(annotation, mode="eval").body) == ndim


def test_where_select_and_conditional_expression_operands():
    selects = {s.kind: s for s in model(K.k_selects).kernel.selects}
    where = selects["where"]
    assert (where.line, where.condition, where.operands) == (
        line_of("where"),
        "z[i] > 0.0",
        ("wp.exp(z[i])", "0.0"),
    )
    assert where.operand_calls == (("exp",), ())
    assert selects["ifexp"].line == line_of("ifexp") and selects["ifexp"].operand_calls == ((), ("sqrt",))
    assert selects["select"].operands == ("z[i]", "wp.log(z[i])")


def test_calls_name_the_function():
    calls = {(c.line, c.name) for c in model(K.k_selects).kernel.calls}
    piecewise = line_of("piecewise")
    assert {(piecewise, "floor"), (piecewise, "int"), (piecewise, "float")} <= calls
    assert (line_of("where"), "exp") in calls and (line_of("select"), "log") in calls


def test_divisions_and_comparisons():
    facts = model(K.k_selects).kernel
    divisions = [(d.line, d.op, d.numerator, d.denominator) for d in facts.divisions]
    assert divisions == [
        (line_of("div_aug"), "/=", "out[i]", "z[i] - 1.0"),
        (line_of("div"), "/", "out[i]", "wp.length(wp.vec2(z[i], 1.0))"),
    ]
    comparisons = {(c.line, c.text) for c in facts.comparisons}
    assert comparisons == {
        (line_of("where"), "z[i] > 0.0"),
        (line_of("ifexp"), "z[i] > 1.0"),
        (line_of("select"), "z[i] < 0.0"),
    }


def test_custom_adjoint_assign_versus_accumulate():
    source = model(K.k_custom_and_atomics)
    grads = {f.of: f for f in source.custom_adjoints()}
    assert set(grads) == {"twice", "thrice"}
    assert [(a.line, a.variable, a.op) for a in grads["twice"].adjoint_assigns] == [
        (line_of("adjoint_assign"), "x", "=")
    ]
    assert [(a.line, a.op) for a in grads["thrice"].adjoint_assigns] == [
        (line_of("adjoint_accumulate"), "+=")
    ]
    assert grads["twice"].name == "adj_twice" and grads["twice"].role == FUNC_GRAD
    assert {f.name for f in source.functions if f.role == FUNC} == {"twice", "thrice", "next_free_slot"}
    assert (
        source.line_text(line_of("adjoint_assign"), FILE)
        == "wp.adjoint[x] = 2.0 * adj_ret  # @adjoint_assign"
    )


def test_atomics_whose_result_is_used():
    source = model(K.k_custom_and_atomics)
    atomics = {(a.line, a.array, a.result_used) for a in source.kernel.atomics}
    assert atomics == {
        (line_of("atomic_used"), "counter", True),
        (line_of("atomic_discarded"), "total", False),
    }
    (next_free_slot,) = [f for f in source.functions if f.name == "next_free_slot"]
    assert [(a.line, a.result_used) for a in next_free_slot.atomics] == [(line_of("atomic_in_func"), True)]


def test_line_text_kernel_only_versus_call_tree():
    source = model(K.k_custom_and_atomics)
    assert source.kernel_line_text(line_of("calls_custom")).endswith("# @calls_custom")
    assert source.kernel_line_text(line_of("atomic_in_func")) is None  # a callee line
    assert source.line_text(line_of("atomic_in_func")).endswith("# @atomic_in_func")
    assert source.line_text(1) is None


def test_json_round_trip_is_exact():
    for kernel in (K.k_loops, K.k_inplace, K.k_components, K.k_selects, K.k_custom_and_atomics):
        source = model(kernel)
        assert KernelSource.from_json(source.to_json()) == source
    assert KernelSource.from_json("") is None
    assert KernelSource.from_json('{"version": 999}') is None


def test_the_recorder_stores_the_sources_and_the_analyzer_builds_the_same_model():
    """Schema 5: ``kernels.source_model`` holds the sources (kernel, callees, custom
    adjoints); building them gives the model the recorder used to store."""
    from warptrace.kernel_source import FunctionSource, build

    stored = json.loads(kernel_facts(K.k_custom_and_atomics).source_model)
    assert stored["inputs"] == 1 and stored["kernel"]["role"] == "kernel"
    assert {f["role"] for f in stored["functions"]} >= {FUNC, FUNC_GRAD}

    def source(data):
        return FunctionSource(**{**data, "constants": tuple(tuple(c) for c in data["constants"])})

    built = build(source(stored["kernel"]), tuple(source(f) for f in stored["functions"]))
    assert model(K.k_custom_and_atomics) == built
    assert KernelSource.from_json(built.to_json()) == built  # a schema 2-4 trace: the built model
    assert KernelSource.from_json(json.dumps({**stored, "inputs": 99})) is None  # unknown layout


def test_unparseable_source_gives_empty_facts_and_conservative_answers():
    from warptrace.kernel_source import FunctionSource, build

    source = build(FunctionSource("kernel", "broken", "f.py", 3, "def broken(:\n    pass"))
    assert not source.kernel.parsed and source.kernel.loops == ()
    assert source.adjoint_needs_value("x", ("x",), ("x",)) is True
    assert source.stores_twice("x") is None
    assert parse_function("x = 1") is None


def test_model_is_dataclasses_all_the_way_down():
    source = model(K.k_selects)
    assert dataclasses.is_dataclass(source.kernel) and dataclasses.is_dataclass(source.kernel.selects[0])


def test_kernel_source_does_not_need_warp(monkeypatch):
    for name in [m for m in sys.modules if m.startswith("warptrace.kernel_source")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "warp", None)
    import warptrace.kernel_source as fresh

    assert fresh.parse_function("def f(x):\n    return x") is not None


@pytest.mark.parametrize("kernel", [K.k_loops, K.k_custom_and_atomics])
def test_model_lines_match_the_file(kernel):
    source = model(kernel)
    lines = Path(FILE).read_text().splitlines()
    for function in source.all_functions:
        for statement in function.statements:
            assert source.line_text(statement.line, function.file) == lines[statement.line - 1].strip()


def _downgrade_to_version_1(trace_path) -> None:
    """Rewrite a trace as schema version 1 wrote it: no ``kernels.source_model`` column."""
    import json

    import pyarrow.parquet as pq

    meta_path = trace_path / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["schema_version"] = 1
    meta_path.write_text(json.dumps(meta))
    for part in (trace_path / "kernels").glob("part-*.parquet"):
        table = pq.read_table(part)
        pq.write_table(table.drop_columns(["source_model"]), part)


@pytest.mark.parametrize("name", ["wt308_atomic_slot", "wt202_store_twice", "ok_flow_replayed_accumulate"])
def test_version_1_trace_gives_the_same_report(name, tmp_path):
    """A v1 trace (model rebuilt from kernels.source) and a v2 trace (model stored) analyze alike."""
    import warptrace
    from tests.zoo import discover, load
    from warptrace.report import render

    (program,) = [p for p in discover() if p.name == name]
    module = load(program, module_name="kernel_source_" + name)
    trace_path = tmp_path / "run.wtrace"
    warptrace.start(trace_path)
    try:
        module.run()
    finally:
        warptrace.stop()
    stored = render(warptrace.analyze(trace_path), "json")
    _downgrade_to_version_1(trace_path)
    rebuilt = render(warptrace.analyze(trace_path), "json")
    assert rebuilt == stored


# ---------------------------------------------------------------- store first, inside callees

_STORE_FIRST_CASES = {
    # the function stores into `a` before any read, and never after: the replay stores again first
    "def f(a: wp.array(dtype=float), x: float, i: int):\n    a[i] = x\n    return a[i] * a[i]\n": True,
    "def f(a: wp.array(dtype=float), x: float, i: int):\n    if x > 0.0:\n        a[i] = x\n    y = a[i]\n    return y\n": True,
    # a read first, a read in the stored value, or a store after a read
    "def f(a: wp.array(dtype=float), i: int):\n    s = a[i]\n    a[i] = s * 2.0\n": False,
    "def f(a: wp.array(dtype=float), i: int):\n    a[i] = (\n        a[i] * 2.0)\n": False,
    "def f(a: wp.array(dtype=float), x: float, i: int):\n    a[i] = x\n    y = a[i]\n    a[i] = y * y\n": False,
    # uses it cannot order: read-modify-writes, the array passed on or aliased, no store
    "def f(a: wp.array(dtype=float), x: float, i: int):\n    a[i] += x\n    return a[i]\n": False,
    "def f(a: wp.array(dtype=wp.vec2), x: float, i: int):\n    a[i][0] = x\n    return a[i][0]\n": False,
    "def f(a: wp.array(dtype=wp.vec2), x: float, i: int):\n    a[i].x = x\n    return a[i].x\n": False,
    "def f(a: wp.array(dtype=float), x: float, i: int):\n    a[i] = x\n    return g(a, i)\n": False,
    "def f(a: wp.array(dtype=float), x: float, i: int):\n    b = a\n    b[i] = x\n    return a[i]\n": False,
    "def f(a: wp.array(dtype=float), i: int):\n    return a[i]\n": False,
    "def f(a: wp.array(dtype=float), x: float, i: int):\n    a[i], y = x, 1.0\n    return a[i]\n": False,
}


@pytest.mark.parametrize("source", list(_STORE_FIRST_CASES), ids=range(len(_STORE_FIRST_CASES)))
def test_stores_before_reads(source: str) -> None:
    from warptrace.kernel_source.stores import stores_before_reads

    assert stores_before_reads(source, "a") is _STORE_FIRST_CASES[source]


def test_whole_array_calls() -> None:
    from warptrace.kernel_source.stores import whole_array_calls

    kernel = "def k(a: wp.array(dtype=float), b: wp.array(dtype=float)):\n    i = wp.tid()\n    y = h.f(b, a, i)\n    g(a)\n"
    assert whole_array_calls(kernel, "a") == (("h.f", "f", 1), ("g", "g", 0))
    assert whole_array_calls(kernel, "b") == (("h.f", "f", 0),)
    assert whole_array_calls(kernel, "c") == ()
    direct = "def k(a: wp.array(dtype=float)):\n    i = wp.tid()\n    g(a)\n    a[i] = 1.0\n"
    assert whole_array_calls(direct, "a") is None  # a direct store besides the call
    keyword = "def k(a: wp.array(dtype=float)):\n    g(arr=a)\n"
    assert whole_array_calls(keyword, "a") is None


def test_walk_is_ast_walk_node_by_node():
    """``syntax.walk`` lists a node's subtree without ``ast.walk``'s generators: the same nodes in
    the same order for every node of real sources (this file's kernels, the kernel-source package)."""
    from warptrace.kernel_source import syntax

    files = [Path(K.__file__), *sorted(Path(syntax.__file__).parent.glob("*.py"))]
    for path in files:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            assert syntax.walk(node) == tuple(ast.walk(node)), (path, getattr(node, "lineno", None))


def test_built_facts_are_shared_between_kernels_and_equal_to_fresh_ones():
    """``build`` computes a function's facts once per source in a process (the kernels of a program
    reach the same helpers): the model equals the one of facts computed afresh, a helper's facts
    are one object in every kernel that reaches it, and no model holds one object twice."""
    from warptrace.kernel_source import FunctionSource, build, function_facts

    def sources(kernel):
        stored = json.loads(kernel_facts(kernel).source_model)

        def source(data):
            return FunctionSource(**{**data, "constants": tuple(tuple(c) for c in data["constants"])})

        return source(stored["kernel"]), tuple(source(f) for f in stored["functions"])

    kernel, functions = sources(K.k_custom_and_atomics)
    assert len(functions) >= 3
    built = build(kernel, functions)
    assert built == KernelSource(function_facts(kernel), tuple(function_facts(f) for f in functions))
    again = build(kernel, functions[1:])  # another kernel reaching some of the same functions
    assert all(a is b for a, b in zip(again.functions, built.functions[1:]))
    assert again.kernel is built.kernel
    # a source listed twice under one model (as the kernel and as a function) is two objects:
    # KernelSource.index_of tells them apart by identity
    twice = build(kernel, (kernel, *functions))
    assert twice.functions[0] == twice.kernel and twice.functions[0] is not twice.kernel
    assert [twice.index_of(f) for f in twice.all_functions] == list(range(len(twice.all_functions)))


def test_calls_that_only_read_an_array_do_not_replay_a_write() -> None:
    from warptrace.kernel_source import RESULT_DISCARDED, build
    from warptrace.kernel_source.facts import FUNC, KERNEL, FunctionSource

    reader = "@wp.func\ndef get(x: wp.array(dtype=float), i: int):\n    return x[i] * x[i]\n"
    writer = "@wp.func\ndef bump(x: wp.array(dtype=float), i: int):\n    wp.atomic_add(x, i, 1.0)\n"
    body = (
        "@wp.kernel\ndef k(x: wp.array(dtype=float), out: wp.array(dtype=float)):\n"
        "    i = wp.tid()\n    out[i] = get(x, i)\n    wp.atomic_add(x, i, 0.1)\n"
    )
    functions = (
        FunctionSource(FUNC, "get", "f.py", 1, reader),
        FunctionSource(FUNC, "bump", "f.py", 1, writer),
    )
    source = build(FunctionSource(KERNEL, "k", "f.py", 1, body), functions)
    assert source.passes_to_function("x", ()) == 0  # get only reads x; the atomic is not replayed
    calls_writer = build(FunctionSource(KERNEL, "k", "f.py", 1, body + "    bump(x, i)\n"), functions)
    assert calls_writer.passes_to_function("x", ()) >= RESULT_DISCARDED
