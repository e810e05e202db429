"""WT310 through a handle: the parameter reaches the loss only through mesh queries.

``lift`` raises a mesh (a kernel writes its points, which have a gradient) and the loss is
the squared distance from two query points to the mesh, found with
``wp.mesh_query_point_no_sign`` and evaluated with ``wp.mesh_eval_position``. Warp
differentiates those builtins with respect to the query point only (measured on Warp 1.19:
the points' gradient stays zero where finite differences give -2.2 for ``lift``), so no
backward reaches ``lift``. The recorder resolves the ``wp.uint64`` argument to the mesh's
arrays and marks the query reads as carrying no gradient.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
BASE = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]], dtype=np.float32)
QUERIES = np.array([[0.3, 0.4, 1.0], [0.7, 0.2, 0.5]], dtype=np.float32)


@wp.kernel
def raise_vertices(
    base: wp.array(dtype=wp.vec3), lift: wp.array(dtype=float), points: wp.array(dtype=wp.vec3)
):
    i = wp.tid()
    points[i] = base[i] + wp.vec3(0.0, 0.0, lift[0])


@wp.kernel
def distance_to_mesh(mesh: wp.uint64, queries: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    q = queries[i]
    hit = wp.mesh_query_point_no_sign(mesh, q, 10.0)
    if hit.result:
        p = wp.mesh_eval_position(mesh, hit.face, hit.u, hit.v)
        wp.atomic_add(loss, 0, wp.length_sq(q - p))


def run() -> dict:
    base = wp.array(BASE, dtype=wp.vec3, device=DEVICE)
    queries = wp.array(QUERIES, dtype=wp.vec3, device=DEVICE)
    indices = wp.array(np.array([0, 1, 2, 0, 2, 3], dtype=np.int32), device=DEVICE)
    lift = wp.array([0.2], dtype=float, requires_grad=True, device=DEVICE)  # expect: WT310
    points = wp.clone(base, requires_grad=True)
    mesh = wp.Mesh(points=points, indices=indices)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(raise_vertices, 4, inputs=[base, lift], outputs=[points], device=DEVICE)
        mesh.refit()
        wp.launch(distance_to_mesh, 2, inputs=[mesh.id, queries], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    expected = np.array([np.sum(-2.0 * (QUERIES[:, 2].astype(np.float64) - 0.2))])
    return {"grad": lift.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
