"""How a kernel uses the value an atomic returns (warptrace.kernel_source.result_uses), from
source text alone; the mechanism behind each kind is measured in
tests/test_warp_mechanisms_atomics.py."""

from __future__ import annotations

import json
import textwrap

import pytest

from warptrace.kernel_source import FUNC, KERNEL, FunctionSource, KernelSource, build, function_facts


def uses(body: str, params: str = "x: wp.array[float], count: wp.array[int], out: wp.array[float]"):
    source = f"@wp.kernel\ndef k({params}):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    facts = function_facts(FunctionSource(KERNEL, "k", "k.py", 2, source))
    return [(a.line, a.uses, a.returned) for a in facts.atomics if a.result_used]


def kinds(body: str, **kw) -> list[str]:
    return [kind for _, found, _ in uses(body, **kw) for kind, _ in found[:1]] or [""]


@pytest.mark.parametrize(
    ("body", "kind", "partners"),
    [
        # the counter: an index into a differentiable array
        ("i = wp.tid()\nslot = wp.atomic_add(count, 0, 1)\nout[slot] = x[i]", "index", ("out",)),
        ("i = wp.tid()\nout[wp.atomic_add(count, 0, 1)] = x[i]", "index", ("out",)),
        ("i = wp.tid()\ns = wp.atomic_add(count, 0, 1)\nj = s * 3 + 1\nout[j] = x[i]", "index", ("out",)),
        ("i = wp.tid()\ns = wp.atomic_add(count, 0, 1)\nwp.atomic_add(out, s, x[i])", "index", ("out",)),
        ("i = wp.tid()\ns = wp.atomic_add(count, 0, 1)\nout[i] = x[s]", "index", ("x",)),
        # a branch: if, conditional expression, wp.where, loop bounds
        ("i = wp.tid()\nold = wp.atomic_max(count, 0, 1)\nif old == 0:\n    out[i] = x[i]", "branch", ()),
        (
            "i = wp.tid()\nold = wp.atomic_cas(count, 0, 0, 1)\nout[i] = x[i] if old == 0 else 0.0",
            "branch",
            (),
        ),
        (
            "i = wp.tid()\nold = wp.atomic_add(count, 0, 1)\nout[i] = wp.where(old > 2, x[i], 0.0)",
            "branch",
            (),
        ),
        (
            "i = wp.tid()\nn = wp.atomic_add(count, 0, 1)\nfor j in range(n):\n    out[i] += x[i]",
            "branch",
            (),
        ),
        # a factor of another operand
        ("i = wp.tid()\nk = wp.atomic_add(count, 0, 1)\nout[i] = float(k + 1) * x[i]", "factor", ("i", "x")),
        (
            "i = wp.tid()\nk = wp.atomic_add(count, 0, 1)\nout[i] = wp.min(float(k), x[i])",
            "factor",
            ("i", "x"),
        ),
        (
            "i = wp.tid()\nk = wp.atomic_add(count, 0, 1)\ny = x[i]\ny *= float(k)\nout[i] = y",
            "factor",
            ("y",),
        ),
        # data: stored, added, cast
        ("i = wp.tid()\nout[i] = wp.atomic_min(x, i, 2.0)", "value", ("out",)),
        ("i = wp.tid()\nk = wp.atomic_add(count, 0, 1)\nout[i] = x[i] + float(k)", "value", ("out",)),
        (
            "i = wp.tid()\nk = wp.atomic_add(count, 0, 1)\nv = wp.vec2(float(k), 0.0)\nout[i] = v[0]",
            "value",
            ("out",),
        ),
    ],
)
def test_kinds_of_use(body, kind, partners):
    ((_, found, _),) = uses(body)
    assert found[0] == (kind, partners)


def test_no_use_at_all_and_accumulation_only():
    assert uses("i = wp.tid()\nwp.atomic_add(out, 0, x[i])") == []
    ((_, found, returned),) = uses("i = wp.tid()\nk = wp.atomic_add(count, 0, 1)")
    assert found == () and not returned


def test_stored_into_memory_is_not_a_flow():
    """A value stored into an array stays there: reading the array back is not a use of it."""
    body = "i = wp.tid()\nout[i] = float(wp.atomic_add(count, 0, 1))\nout[i + 1] = x[int(out[i])]"
    ((_, found, _),) = uses(body)
    assert [kind for kind, _ in found] == ["value"]


def test_a_value_kept_in_a_local_component_flows():
    body = "i = wp.tid()\nv = wp.vec2i(0, 0)\nv[0] = wp.atomic_add(count, 0, 1)\nout[v[0]] = x[i]"
    assert kinds(body) == ["index"]


def test_strongest_use_first():
    body = (
        "i = wp.tid()\nk = wp.atomic_add(count, 0, 1)\nout[i] = float(k) * x[i]\nif k < 4:\n    out[k] = 1.0"
    )
    ((_, found, _),) = uses(body)
    assert [kind for kind, _ in found] == ["index", "branch", "factor"]


def test_returned_by_a_function_and_used_by_its_caller():
    func = "@wp.func\ndef take(count: wp.array[int]):\n    return wp.atomic_add(count, 0, 1)\n"
    kernel = (
        "@wp.kernel\ndef k(x: wp.array[float], count: wp.array[int], ids: wp.array[int], out: wp.array[float]):\n"
        "    i = wp.tid()\n    ids[i] = take(count)\n    out[take(count)] = x[i]\n"
    )
    source = build(
        FunctionSource(KERNEL, "k", "k.py", 10, kernel), (FunctionSource(FUNC, "take", "k.py", 1, func),)
    )
    (take,) = source.functions
    ((atomic),) = take.atomics
    assert atomic.returned and atomic.uses == (("value", ()),)
    found = sorted(use.kind for _, use in source.returned_value_uses(take))
    assert found == ["index", "value"]


def test_a_stored_model_without_uses_gets_them_from_its_source():
    kernel = (
        "@wp.kernel\ndef k(x: wp.array[float], count: wp.array[int], out: wp.array[float]):\n"
        "    i = wp.tid()\n    slot = wp.atomic_add(count, 0, 1)\n    out[slot] = x[i]\n"
    )
    built = build(FunctionSource(KERNEL, "k", "k.py", 10, kernel))
    data = json.loads(built.to_json())
    for atomic in data["kernel"]["atomics"]:
        del atomic["uses"], atomic["returned"]
    loaded = KernelSource.from_json(json.dumps(data))
    assert loaded is not None and loaded.kernel.atomics == built.kernel.atomics
    assert loaded.kernel.atomics[0].uses[0] == ("index", ("out",))
