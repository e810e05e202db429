"""Per element: which elements one thread reads (with a value an adjoint needs) and then
writes (warptrace.kernel_source.elements, asked through KernelSource.overwrite)."""

from __future__ import annotations

import pytest

from tests import kernels_for_elements as K
from tests.kernels_for_elements import line_of
from warptrace.kernel_source import KernelSource
from warptrace.kernel_source.elements import NONE, POSSIBLE, PROVEN
from warptrace.record.kernels import kernel_facts


def model(kernel) -> KernelSource:
    stored = KernelSource.from_json(kernel_facts(kernel).source_model)
    assert stored is not None
    return stored


def verdict(kernel, path: str, active: tuple[str, ...]):
    found = model(kernel).overwrite(path, frozenset(active))
    assert found is not None
    return found


def test_an_additive_update_after_a_read_another_adjoint_needs():
    found = verdict(K.k_read_then_add, "b", ("y", "b"))
    assert found.kind == PROVEN and found.additive
    assert (found.read_line, found.write_line) == (line_of("product_read"), line_of("add_after"))
    # the adjoint of y * b[0] needs b[0] only for y's gradient
    assert verdict(K.k_read_then_add, "b", ("b",)).kind == NONE


@pytest.mark.parametrize(
    "kernel",
    [K.k_add_then_read, K.k_linear_then_add, K.k_other_constant, K.k_store_then_read],
    ids=["update first", "linear read", "other constant element", "store first"],
)
def test_exact_shapes(kernel):
    source = model(kernel)
    for path in source.kernel.array_params:
        found = source.overwrite(path, frozenset(source.kernel.array_params))
        assert found is not None and found.kind == NONE, (path, found)


def test_tree_walk_is_not_proven_but_an_in_place_conversion_is():
    pose = verdict(K.k_tree, "pose", ("angle", "pose", "force"))
    assert pose.kind == POSSIBLE
    assert (pose.read_line, pose.read_function) == (line_of("tree_read"), "parent_pose")
    force = verdict(K.k_tree, "force", ("angle", "pose", "force"))
    assert force.kind == PROVEN and not force.additive
    assert (force.read_line, force.write_line) == (line_of("force_read"), line_of("force_write"))


def test_gathers_and_scatters():
    assert verdict(K.k_gather, "x", ("x",)).kind == POSSIBLE
    # the same index expression twice, no write to idx in between: the same element
    same = verdict(K.k_same_index_expression, "x", ("x",))
    assert same.kind == PROVEN and same.read_line == line_of("same_index")


def test_in_a_called_function():
    found = verdict(K.k_clamp, "v", ("v",))
    assert found.kind == PROVEN
    assert (found.read_line, found.write_line) == (line_of("clamp_read"), line_of("clamp_write"))
    assert found.read_function == "clamp_in_place"


def test_custom_adjoint_reads_what_the_call_leaves():
    assert verdict(K.k_custom, "x", ("x",)).kind == NONE
    # a store after the call changes what the custom adjoint reads: not provably the same element
    assert verdict(K.k_custom_then_store, "x", ("x",)).kind == POSSIBLE
