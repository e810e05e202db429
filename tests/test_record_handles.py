"""Arrays behind handles: a ``wp.uint64`` kernel argument holding a Mesh, Bvh or Volume id.

The kernel facts say which of the handle's arrays a kernel touches and how; the launch
resolves the id to the live object and records those arrays ("mesh.points") like any
argument. What Warp differentiates through a handle is measured here too, since the
flags depend on it: an element load through ``wp.mesh_get(id).points`` sends a gradient
to the points, the query builtins do not.
"""

from __future__ import annotations

import numpy as np
import pytest

wp = pytest.importorskip("warp")

import warptrace  # noqa: E402
from warptrace.record.kernel_handles import BVH, MESH, VOLUME  # noqa: E402
from warptrace.record.kernels import kernel_facts  # noqa: E402
from warptrace.trace import schema as S  # noqa: E402
from warptrace.trace.reader import read_trace  # noqa: E402

DEVICE = "cpu"
POINTS = np.array([[0, 0, 0.1], [1, 0, 0.2], [1, 1, 0.3], [0, 1, 0.0]], dtype=np.float32)
INDICES = np.array([0, 1, 2, 0, 2, 3], dtype=np.int32)


@wp.func
def _point_z(m: wp.uint64, i: int) -> float:
    return wp.mesh_get(m).points[i][2]


@wp.kernel
def _through_points(mesh: wp.uint64, loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, _point_z(mesh, i))


@wp.kernel
def _query(mesh: wp.uint64, qs: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    handle = mesh
    res = wp.mesh_query_point_no_sign(handle, qs[i], 10.0)
    if res.result:
        p = wp.mesh_eval_position(handle, res.face, res.u, res.v)
        wp.atomic_add(loss, 0, wp.length_sq(p - qs[i]))


@wp.kernel
def _move(mesh: wp.uint64, offset: float):
    i = wp.tid()
    m = wp.mesh_get(mesh)
    m.points[i] = m.points[i] + wp.vec3(0.0, 0.0, offset)


@wp.kernel
def _bvh_count(bvh: wp.uint64, counts: wp.array(dtype=int)):
    i = wp.tid()
    query = wp.bvh_query_aabb(bvh, wp.vec3(-1.0), wp.vec3(1.0))
    index = wp.int32(0)  # (not int(0): ruff would make it a literal, which Warp keeps constant)
    while wp.bvh_query_next(query, index):
        counts[i] += 1


@wp.kernel
def _volume_write(volume: wp.uint64, value: float):
    wp.volume_store_f(volume, 0, 0, 0, value)


@wp.kernel
def _plain(n: wp.uint64, x: wp.array(dtype=float)):
    x[0] = float(n)


def _uses(kernel):
    return {(u.name, u.field): u for u in kernel_facts(kernel).handles}


def test_facts_name_the_arrays_behind_each_handle_argument():
    through = _uses(_through_points)
    assert set(through) == {("mesh", "points")}  # through a @wp.func parameter
    points = through["mesh", "points"]
    assert (points.kind, points.read, points.gradient, points.store) == (MESH, True, True, False)

    query = _uses(_query)  # through a local copy of the id
    assert set(query) == {("mesh", "points"), ("mesh", "indices")}
    assert not any(u.gradient for u in query.values())

    moved = _uses(_move)["mesh", "points"]
    assert moved.read and moved.store

    bvh = _uses(_bvh_count)
    assert {(f, u.kind) for (_, f), u in bvh.items()} == {("lowers", BVH), ("uppers", BVH)}
    volume = _uses(_volume_write)["volume", "buffer"]
    assert (volume.kind, volume.store, volume.read) == (VOLUME, True, False)
    assert kernel_facts(_plain).handles == ()  # an integer that is no handle


def test_mesh_gradients_flow_through_element_loads_only():
    # the measurement behind FLAG_NO_GRAD: Warp 1.19 on the CPU
    def grad_of(kernel, extra):
        pts = wp.array(POINTS, dtype=wp.vec3, requires_grad=True, device=DEVICE)
        mesh = wp.Mesh(points=pts, indices=wp.array(INDICES, device=DEVICE))
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        tape = wp.Tape()
        with tape:
            wp.launch(kernel, 4 if kernel is _through_points else 2, inputs=[mesh.id, *extra], outputs=[loss],
                      device=DEVICE)  # fmt: skip
        tape.backward(loss)
        return pts.grad.numpy()

    assert np.allclose(grad_of(_through_points, [])[:, 2], 1.0)
    queries = wp.array(np.array([[0.2, 0.3, 1.0], [0.7, 0.6, -0.5]], dtype=np.float32), dtype=wp.vec3)
    assert not grad_of(_query, [queries]).any()  # finite differences are not zero here


def test_launches_record_the_arrays_behind_the_ids(tmp_path):
    path = tmp_path / "run.wtrace"
    warptrace.start(path)
    try:
        pts = wp.array(POINTS, dtype=wp.vec3, requires_grad=True, device=DEVICE)
        mesh = wp.Mesh(points=pts, indices=wp.array(INDICES, device=DEVICE))
        queries = wp.array(np.array([[0.2, 0.3, 1.0]], dtype=np.float32), dtype=wp.vec3, device=DEVICE)
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        tape = wp.Tape()
        with tape:
            wp.launch(_through_points, 4, inputs=[mesh.id], outputs=[loss], device=DEVICE)
            wp.launch(_query, 1, inputs=[mesh.id, queries], outputs=[loss], device=DEVICE)
        tape.backward(loss)
        wp.launch(_move, 4, inputs=[mesh.id, 0.5], device=DEVICE)
        mesh.refit()
    finally:
        warptrace.stop()
    trace = read_trace(path)
    events = trace.tables["events"].to_pylist()
    kernels = {row["kernel_id"]: row["key"] for row in trace.tables["kernels"].to_pylist()}
    arrays = {row["array_id"]: row for row in trace.tables["arrays"].to_pylist()}
    points_alloc = next(a["alloc_id"] for a in arrays.values() if a["label"] == "pts")
    by_seq: dict[int, list] = {}
    for row in trace.tables["accesses"].to_pylist():
        by_seq.setdefault(row["seq"], []).append(row)

    def rows(key, adjoint=False):
        ev = next(e for e in events if e["kind"] == "launch" and kernels.get(e["kernel"]) == key
                  and e["adjoint"] == adjoint)  # fmt: skip
        return {(r["arg"], arrays[r["array_id"]]["grad_of"] >= 0): r for r in by_seq[ev["seq"]]}

    loads = rows(_through_points.key)
    assert loads["mesh.points", False]["alloc_id"] == points_alloc
    assert loads["mesh.points", False]["role"] == S.ROLE_READ
    assert not loads["mesh.points", False]["flags"] & S.FLAG_NO_GRAD
    adjoint = rows(_through_points.key, adjoint=True)
    assert adjoint["mesh.points", True]["role"] & S.ROLE_WRITE  # the points' gradient
    query = rows(_query.key)
    assert query["mesh.points", False]["flags"] & S.FLAG_NO_GRAD
    assert ("mesh.points", True) not in rows(_query.key, adjoint=True)  # no gradient to the points
    assert rows(_move.key)["mesh.points", False]["role"] == S.ROLE_READWRITE
    refit = next(e for e in events if e["kind"] == "native" and "Mesh.refit" in (e["detail"] or ""))
    assert [r["alloc_id"] for r in by_seq[refit["seq"]]] == [points_alloc]
