"""The weights with which a kernel reduces one array argument into another
(``warptrace.kernel_source.reduction``): real Warp kernels, their recorded source model."""

from __future__ import annotations

import pytest

from warptrace.kernel_source import KernelSource
from warptrace.kernel_source.reduction import reduction_weights

wp = pytest.importorskip("warp")
from warptrace.record.kernels import kernel_facts  # noqa: E402

SAMPLES = 8  # a module constant: Warp compiles its value in


@wp.func
def share(v: float):
    return v / float(SAMPLES)


@wp.kernel
def mean_by_constant(terms: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, terms[i] / float(SAMPLES))


@wp.kernel
def mean_by_shape(terms: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    loss[0] += terms[i] / float(terms.shape[0])


@wp.kernel
def mean_by_func(terms: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, share(terms[i]))


@wp.kernel
def mean_by_loop(terms: wp.array(dtype=float), loss: wp.array(dtype=float)):
    total = float(0.0)  # noqa: UP018 (a dynamic variable for Warp)
    for j in range(terms.shape[0]):
        total += terms[j]
    loss[0] = total / float(len(terms))


@wp.kernel
def mean_by_argument(terms: wp.array(dtype=float), loss: wp.array(dtype=float), n: int):
    i = wp.tid()
    wp.atomic_add(loss, 0, terms[i] / float(n))


@wp.kernel
def plain_sum(terms: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_sub(loss, 0, -terms[i])


@wp.kernel
def counted_twice(terms: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, terms[i] + terms[i])


@wp.kernel
def pairs(terms: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, 0.5 * (terms[2 * i] + terms[2 * i + 1]))


@wp.kernel
def squares(terms: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, terms[i] * terms[i])


@wp.kernel
def hinge(terms: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    if terms[i] > 0.0:
        wp.atomic_add(loss, 0, terms[i])


@wp.kernel
def maximum(terms: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_max(loss, 0, terms[i])


@wp.kernel
def weighted(terms: wp.array(dtype=float), w: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, w[i] * terms[i])


def weights(kernel) -> dict[str, float | None]:
    source = KernelSource.from_json(kernel_facts(kernel).source_model)
    assert source is not None
    shapes = {"terms": (8,), "loss": (1,), "w": (8,)}
    return {r.output: r.weight for r in reduction_weights(source, "terms", shapes)}


@pytest.mark.parametrize(
    "kernel, expected",
    [
        (mean_by_constant, {"loss": 0.125}),
        (mean_by_shape, {"loss": 0.125}),
        (mean_by_func, {"loss": 0.125}),
        (mean_by_loop, {"loss": 0.125}),
        (plain_sum, {"loss": 1.0}),
        (pairs, {"loss": 0.5}),
        # linear, but the weight is not fixed by what the trace holds
        (mean_by_argument, {"loss": None}),
        (counted_twice, {"loss": None}),
        (weighted, {"loss": None}),
        # not linear in the values: no reduction with weights
        (squares, {}),
        (hinge, {}),
        (maximum, {}),
    ],
)
def test_reduction_weights(kernel, expected):
    assert weights(kernel) == pytest.approx(expected)


def test_the_store_line_is_the_atomic_line():
    source = KernelSource.from_json(kernel_facts(mean_by_constant).source_model)
    assert source is not None
    (found,) = reduction_weights(source, "terms", {"terms": (8,), "loss": (1,)})
    text = source.line_text(found.line)
    assert text is not None and "atomic_add" in text
