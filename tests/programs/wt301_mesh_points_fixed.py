"""Fixed twin of wt301_mesh_points: the mesh's points carry a gradient.

``wp.clone(base, requires_grad=True)``: the adjoint of ``wp.mesh_get(mesh_id).points[i]``
accumulates into the points' gradient (the mesh descriptor holds its pointer from
construction on), and ``raise_vertices`` carries it on to ``lift``.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
BASE = np.array([[0, 0, 0.1], [1, 0, 0.2], [1, 1, 0.3], [0, 1, 0.0]], dtype=np.float32)
WEIGHT = np.array([1.0, 0.5, 0.25, 0.75], dtype=np.float32)
TARGET = 0.4


@wp.kernel
def raise_vertices(
    base: wp.array(dtype=wp.vec3), weight: wp.array(dtype=float), lift: wp.array(dtype=float),
    points: wp.array(dtype=wp.vec3),
):  # fmt: skip
    i = wp.tid()
    points[i] = base[i] + wp.vec3(0.0, 0.0, lift[0] * weight[i])


@wp.kernel
def height_error(mesh: wp.uint64, loss: wp.array(dtype=float)):
    i = wp.tid()
    p = wp.mesh_get(mesh).points[i]
    d = p[2] - TARGET
    wp.atomic_add(loss, 0, d * d)


def true_grad(lift: float) -> np.ndarray:
    z = BASE[:, 2].astype(np.float64) + lift * WEIGHT
    return np.array([np.sum(2.0 * (z - TARGET) * WEIGHT)])


def run() -> dict:
    base = wp.array(BASE, dtype=wp.vec3, device=DEVICE)
    weight = wp.array(WEIGHT, dtype=float, device=DEVICE)
    indices = wp.array(np.array([0, 1, 2, 0, 2, 3], dtype=np.int32), device=DEVICE)
    lift = wp.array([0.2], dtype=float, requires_grad=True, device=DEVICE)
    points = wp.clone(base, requires_grad=True)
    mesh = wp.Mesh(points=points, indices=indices)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(raise_vertices, 4, inputs=[base, weight, lift], outputs=[points], device=DEVICE)
        mesh.refit()
        wp.launch(height_error, 4, inputs=[mesh.id], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": lift.grad.numpy().copy(), "expected": true_grad(0.2)}


if __name__ == "__main__":
    run()
