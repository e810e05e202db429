"""WT102 next to a tree walk: one thread per articulation walks its links from the root and
composes each link's pose from its parent's (`walk`: parent's entry read, child's entry
written, exact, info at most); a second kernel walks the same links and converts each link's
external force to the world frame *in place* (`force[i]` read, then stored again). That
conversion is what the adjoint re-reads: the gradient with respect to the joint angles sees
the converted force (the same bug as Newton 1.8's `eval_rigid_tau`, which overwrites
`body_f_ext[child]`).
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def walk(
    start: wp.array[int],
    end: wp.array[int],
    parent: wp.array[int],
    angle: wp.array[float],
    offset: wp.array[wp.vec2],
    pose: wp.array[wp.vec3],
):
    tree = wp.tid()
    for i in range(start[tree], end[tree]):
        p = parent[i]
        base = wp.vec3(0.0, 0.0, 0.0)
        if p >= 0:
            base = pose[p]
        theta = base[2] + angle[i]
        c = wp.cos(theta)
        s = wp.sin(theta)
        d = offset[i]
        pose[i] = wp.vec3(base[0] + c * d[0] - s * d[1], base[1] + s * d[0] + c * d[1], theta)


@wp.kernel
def external_work(
    start: wp.array[int],
    end: wp.array[int],
    pose: wp.array[wp.vec3],
    force: wp.array[wp.vec2],
    work: wp.array[float],
):
    tree = wp.tid()
    for i in range(start[tree], end[tree]):
        x = pose[i]
        c = wp.cos(x[2])
        s = wp.sin(x[2])
        f = force[i]
        world = wp.vec2(c * f[0] - s * f[1], s * f[0] + c * f[1])
        force[i] = world
        wp.atomic_add(work, 0, world[0] * x[0] + world[1] * x[1])


def total_work(angles, offsets, forces, parents):
    poses = []
    total = 0.0
    for i, p in enumerate(parents):
        bx, by, bt = poses[p] if p >= 0 else (0.0, 0.0, 0.0)
        t = bt + angles[i]
        c, s = np.cos(t), np.sin(t)
        x = bx + c * offsets[i][0] - s * offsets[i][1]
        y = by + s * offsets[i][0] + c * offsets[i][1]
        poses.append((x, y, t))
        fx = c * forces[i][0] - s * forces[i][1]
        fy = s * forces[i][0] + c * forces[i][1]
        total += fx * x + fy * y
    return total


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


PARENTS = [-1, 0, 1, -1, 3]


def run() -> dict:
    angles_np = np.array([0.3, -0.5, 0.8, 1.1, -0.2])
    offsets_np = np.array([[1.0, 0.0], [0.8, 0.1], [0.5, 0.0], [1.2, 0.0], [0.6, -0.2]])
    forces_np = np.array([[0.0, -1.0], [0.5, -2.0], [1.0, 0.0], [0.0, -1.5], [-0.5, 1.0]])
    start = wp.array([0, 3], dtype=int, device=DEVICE)
    end = wp.array([3, 5], dtype=int, device=DEVICE)
    parent = wp.array(PARENTS, dtype=int, device=DEVICE)
    angle = wp.array(angles_np, dtype=float, requires_grad=True, device=DEVICE)
    offset = wp.array(offsets_np, dtype=wp.vec2, device=DEVICE)
    pose = wp.zeros(5, dtype=wp.vec3, requires_grad=True, device=DEVICE)
    force = wp.array(forces_np, dtype=wp.vec2, requires_grad=True, device=DEVICE)
    work = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(walk, 2, [start, end, parent, angle, offset, pose], device=DEVICE)
        wp.launch(external_work, 2, [start, end, pose, force, work], device=DEVICE)  # expect: WT102
    tape.backward(work)
    expected = central_differences(lambda a: total_work(a, offsets_np, forces_np, PARENTS), angles_np)
    return {"grad": angle.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
