"""Look-alike: a constant mesh queried by points that carry the gradient.

The mesh's points have no gradient and no parameter feeds them: they are a constant of the
problem, like a target. The kernel reads them through the mesh id (query builtins and an
element load through ``wp.mesh_get``), the gradient flows to the query points, and nothing
is wrong: no WT301 for the points, no WT310 for the query points. The mesh is moved (and
refit) only after the backward.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
BASE = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]], dtype=np.float32)
QUERIES = np.array([[0.3, 0.4, 1.0], [0.7, 0.2, 0.5]], dtype=np.float32)


@wp.kernel
def distance_to_mesh(mesh: wp.uint64, queries: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    q = queries[i]
    hit = wp.mesh_query_point_no_sign(mesh, q, 10.0)
    if hit.result:
        m = wp.mesh_get(mesh)
        a = m.points[m.indices[3 * hit.face + 0]]
        p = wp.mesh_eval_position(mesh, hit.face, hit.u, hit.v)
        wp.atomic_add(loss, 0, wp.length_sq(q - p) + 0.1 * a[2])


@wp.kernel
def shift(points: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    points[i] = points[i] + wp.vec3(0.0, 0.0, 1.0)


def run() -> dict:
    points = wp.array(BASE, dtype=wp.vec3, device=DEVICE)
    mesh = wp.Mesh(
        points=points, indices=wp.array(np.array([0, 1, 2, 0, 2, 3], dtype=np.int32), device=DEVICE)
    )
    queries = wp.array(QUERIES, dtype=wp.vec3, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(distance_to_mesh, 2, inputs=[mesh.id, queries], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    grad = queries.grad.numpy().copy()
    wp.launch(shift, 4, inputs=[points], device=DEVICE)  # after the backward: fine
    mesh.refit()
    expected = np.zeros_like(QUERIES, dtype=np.float64)
    expected[:, 2] = 2.0 * QUERIES[:, 2]  # the closest point lies straight below each query (z = 0)
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
