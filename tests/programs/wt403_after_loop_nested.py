"""WT403 through nested @wp.funcs: each cluster's centroid pulled toward a target.

`cluster_energy` sums the positions in a dynamic loop and, after the loop, hands the centroid
to `attraction` (a second function). When the adjoint of `cluster_energy` recomputes its
forward values it skips its loop, so the centroid it hands to the adjoint of `attraction` is
the one from before the loop (the origin): the gradient pulls every point toward the target
as if the cluster sat at the origin.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.func
def attraction(center: wp.vec3, target: wp.vec3):
    return wp.length_sq(center - target)


@wp.func
def cluster_energy(pos: wp.array[wp.vec3], start: int, count: int, target: wp.vec3):
    c = wp.vec3()
    for k in range(start, start + count):
        c += pos[k]
    return attraction(c / float(count), target)  # expect: WT403


@wp.kernel
def energies(pos: wp.array[wp.vec3], size: int, target: wp.vec3, loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, cluster_energy(pos, i * size, size, target))


def run() -> dict:
    p_np = np.array([[0.0, 1.0, 0.5], [1.0, 0.0, 0.0], [2.0, 1.0, -1.0], [0.5, 0.5, 0.5]])
    target = np.array([0.5, 2.0, -0.5])
    pos = wp.array(p_np, dtype=wp.vec3, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(energies, 2, [pos, 2, wp.vec3(*target), loss], device=DEVICE)
    tape.backward(loss)
    centers = p_np.reshape(2, 2, 3).mean(axis=1, keepdims=True)
    expected = np.broadcast_to(2.0 * (centers - target) / 2.0, (2, 2, 3))
    return {"grad": pos.grad.numpy().copy(), "expected": expected.reshape(4, 3)}


if __name__ == "__main__":
    run()
