"""Fixed twin of wt310_volume_sample: the field lives in a dense array, interpolated in the kernel.

The same trilinear sample, written out over a ``wp.array3d`` filled from ``gain``: every
load is an array read Warp differentiates, so ``gain.grad`` is the sum of the field's shape
at the probes (7.9).
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
N = 4
PROBES = np.array([[1.2, 1.5, 1.7], [0.5, 2.0, 1.0]], dtype=np.float32)


@wp.kernel
def fill(grid: wp.array3d(dtype=float), gain: wp.array(dtype=float)):
    i, j, k = wp.tid()
    grid[i, j, k] = gain[0] * float(i + j + k)


@wp.func
def lerp_corner(grid: wp.array3d(dtype=float), i: int, j: int, k: int, w: float):
    return w * grid[i, j, k]


@wp.kernel
def probe(grid: wp.array3d(dtype=float), pts: wp.array(dtype=wp.vec3), out: wp.array(dtype=float)):
    t = wp.tid()
    p = pts[t]
    i = int(wp.floor(p[0]))
    j = int(wp.floor(p[1]))
    k = int(wp.floor(p[2]))
    fx = p[0] - float(i)
    fy = p[1] - float(j)
    fz = p[2] - float(k)
    s = float(0.0)
    for c in range(8):
        di = c & 1
        dj = (c >> 1) & 1
        dk = (c >> 2) & 1
        wx = wp.where(di == 1, fx, 1.0 - fx)
        wy = wp.where(dj == 1, fy, 1.0 - fy)
        wz = wp.where(dk == 1, fz, 1.0 - fz)
        s += lerp_corner(grid, i + di, j + dj, k + dk, wx * wy * wz)
    wp.atomic_add(out, 0, s)


def run() -> dict:
    grid = wp.zeros((N, N, N), dtype=float, requires_grad=True, device=DEVICE)
    gain = wp.array([0.5], dtype=float, requires_grad=True, device=DEVICE)
    pts = wp.array(PROBES, dtype=wp.vec3, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(fill, (N, N, N), inputs=[grid, gain], device=DEVICE)
        wp.launch(probe, 2, inputs=[grid, pts], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": gain.grad.numpy().copy(), "expected": np.array([float(PROBES.sum())])}


if __name__ == "__main__":
    run()
