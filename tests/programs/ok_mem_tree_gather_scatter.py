"""Kernels that read and write *different* elements of one array in the same launch, all
exact, none of which may be reported above info: a tree walk (each thread reads the parent's
entry, written earlier by the same thread, and writes the child's), a gather into the other
half of the array (`x[n + i] = sin(x[i])`), and a scatter through an index array to elements
no thread reads (`y[dst[i]] = y[src[i]] ** 2` with disjoint `src` and `dst`)."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def chain(
    start: wp.array[int],
    end: wp.array[int],
    parent: wp.array[int],
    angle: wp.array[float],
    pose: wp.array[float],
):
    tree = wp.tid()
    for i in range(start[tree], end[tree]):
        p = parent[i]
        base = float(0.0)
        if p >= 0:
            base = pose[p]
        pose[i] = wp.sin(base + angle[i])


@wp.kernel
def mirror(x: wp.array[float], n: int):
    i = wp.tid()
    x[n + i] = wp.sin(x[i])


@wp.kernel
def scatter(src: wp.array[int], dst: wp.array[int], y: wp.array[float]):
    i = wp.tid()
    v = y[src[i]]
    y[dst[i]] = v * v


@wp.kernel
def weighted(values: wp.array[float], weights: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, weights[i] * values[i])


def loss_of(kernel, dim, inputs, values, weights):
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    w = wp.array(weights, dtype=float, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, dim, inputs, device=DEVICE)
        wp.launch(weighted, len(weights), [values, w, loss], device=DEVICE)
    tape.backward(loss)


PARENTS = [-1, 0, 1, -1, 3]


def chain_loss(angles, weights):
    pose = np.zeros(len(PARENTS))
    for i, p in enumerate(PARENTS):
        pose[i] = np.sin((pose[p] if p >= 0 else 0.0) + angles[i])
    return float(weights @ pose)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    angles_np = np.array([0.3, -0.5, 0.8, 1.1, -0.2])
    w_chain = np.array([1.0, -0.5, 2.0, 0.3, 1.5])
    angle = wp.array(angles_np, dtype=float, requires_grad=True, device=DEVICE)
    pose = wp.zeros(5, dtype=float, requires_grad=True, device=DEVICE)
    start = wp.array([0, 3], dtype=int, device=DEVICE)
    end = wp.array([3, 5], dtype=int, device=DEVICE)
    parent = wp.array(PARENTS, dtype=int, device=DEVICE)
    loss_of(chain, 2, [start, end, parent, angle, pose], pose, w_chain)

    x_np = np.array([0.5, -1.0, 2.0, 0.0, 0.0, 0.0])
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    w_mirror = np.array([0.0, 0.0, 0.0, 1.0, 2.0, -1.0])
    loss_of(mirror, 3, [x, 3], x, w_mirror)

    y_np = np.array([1.5, -2.0, 0.5, 0.0, 0.0, 0.0])
    y = wp.array(y_np, dtype=float, requires_grad=True, device=DEVICE)
    src = wp.array([0, 1, 2], dtype=int, device=DEVICE)
    dst = wp.array([5, 3, 4], dtype=int, device=DEVICE)
    w_scatter = np.array([0.0, 0.0, 0.0, 1.0, -1.0, 0.5])
    loss_of(scatter, 3, [src, dst, y], y, w_scatter)

    grad = np.concatenate([angle.grad.numpy(), x.grad.numpy()[:3], y.grad.numpy()[:3]])
    expected = np.concatenate(
        [
            central_differences(lambda a: chain_loss(a, w_chain), angles_np),
            np.cos(x_np[:3]) * w_mirror[3:],
            2.0 * y_np[:3] * np.array([0.5, 1.0, -1.0]),
        ]
    )
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
