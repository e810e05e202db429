"""Warp kernels exercised by tests/test_kernel_source_elements.py: which elements one thread
reads and then overwrites. Lines the tests check carry a ``# @tag`` comment."""

from __future__ import annotations

from pathlib import Path

import warp as wp

wp.config.quiet = True


def line_of(tag: str) -> int:
    """Absolute line number of the line ending in ``# @tag``."""
    for lineno, text in enumerate(Path(__file__).read_text().splitlines(), start=1):
        if text.rstrip().endswith(f"# @{tag}"):
            return lineno
    raise KeyError(tag)


@wp.kernel
def k_read_then_add(y: wp.array(dtype=float), b: wp.array(dtype=float), loss: wp.array(dtype=float)):
    loss[0] = y[1] * b[0]  # @product_read
    b[0] += 100.0  # @add_after


@wp.kernel
def k_add_then_read(y: wp.array(dtype=float), b: wp.array(dtype=float), loss: wp.array(dtype=float)):
    b[0] += 100.0
    loss[0] = y[1] * b[0]


@wp.kernel
def k_linear_then_add(y: wp.array(dtype=float), b: wp.array(dtype=float), loss: wp.array(dtype=float)):
    loss[0] = y[1] + 2.0 * b[0]
    wp.atomic_add(b, 0, 100.0)


@wp.kernel
def k_other_constant(y: wp.array(dtype=float), b: wp.array(dtype=float), loss: wp.array(dtype=float)):
    loss[0] = y[1] * b[0]
    b[1] += 100.0


@wp.func
def parent_pose(pose: wp.array(dtype=float), p: int):
    base = float(0.0)  # noqa: UP018
    if p >= 0:
        base = pose[p]  # @tree_read
    return base


@wp.kernel
def k_tree(start: wp.array(dtype=int), end: wp.array(dtype=int), parent: wp.array(dtype=int),
           angle: wp.array(dtype=float), pose: wp.array(dtype=float), force: wp.array(dtype=float)):  # fmt: skip
    tree = wp.tid()
    for i in range(start[tree], end[tree]):
        base = parent_pose(pose, parent[i])
        pose[i] = wp.sin(base + angle[i])  # @tree_write
        f = force[i]  # @force_read
        force[i] = f * wp.cos(pose[i])  # @force_write


@wp.kernel
def k_gather(x: wp.array(dtype=float), idx: wp.array(dtype=int)):
    i = wp.tid()
    x[idx[i]] = wp.sin(x[i])


@wp.kernel
def k_same_index_expression(x: wp.array(dtype=float), idx: wp.array(dtype=int)):
    i = wp.tid()
    x[idx[i]] = wp.sin(x[idx[i]])  # @same_index


@wp.kernel
def k_store_then_read(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = y[i] * 2.0
    y[i] = x[i] * x[i]


@wp.func
def clamp_in_place(v: wp.array(dtype=float), i: int):
    s = v[i]  # @clamp_read
    if s > 1.0:
        v[i] = 1.0  # @clamp_write


@wp.kernel
def k_clamp(v: wp.array(dtype=float)):
    clamp_in_place(v, wp.tid())


@wp.func
def solve_in_place(n: int, x: wp.array(dtype=float)):
    for i in range(n):
        x[i] = wp.sqrt(x[i])


@wp.func_grad(solve_in_place)
def adj_solve_in_place(n: int, x: wp.array(dtype=float)):
    for i in range(n):
        wp.adjoint[x][i] += 0.5 / x[i]


@wp.kernel
def k_custom(n: int, x: wp.array(dtype=float)):
    solve_in_place(n, x)


@wp.kernel
def k_custom_then_store(n: int, x: wp.array(dtype=float)):
    solve_in_place(n, x)
    x[0] = 0.0
