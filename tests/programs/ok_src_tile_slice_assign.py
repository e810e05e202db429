"""Look-alike (fine): rows of a tile overwritten by assignment (``t[0:2, :] = v``, ``t[3] = r``).

A tile is not a vector or matrix value: Warp routes the adjoint of a tile slice or row
assignment by region, so the overwritten rows send no gradient back to where the tile was
loaded from, and the assigned values get theirs. (A component assignment into a local
``wp.vec3``/``wp.mat33`` is what WT402 is about.)
"""

# requires-warp: 1.16  (tile slice assignment does not compile before that: measured on 1.13-1.15)
import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
M, N = 4, 4


@wp.kernel
def patch(src: wp.array2d(dtype=float), val: wp.array2d(dtype=float), row: wp.array1d(dtype=float),
          dst: wp.array2d(dtype=float)):  # fmt: skip
    t = wp.tile_load(src, shape=(M, N))
    v = wp.tile_load(val, shape=(2, N))
    r = wp.tile_load(row, shape=(N,))
    t[0:2, :] = v
    t[3] = r
    wp.tile_store(dst, t)


@wp.kernel
def objective(dst: wp.array2d(dtype=float), weights: wp.array2d(dtype=float), loss: wp.array(dtype=float)):
    i, j = wp.tid()
    wp.atomic_add(loss, 0, dst[i, j] * weights[i, j])


def run() -> dict:
    rng = np.random.default_rng(3)
    weights_np = rng.random((M, N))
    src = wp.array(rng.random((M, N)), dtype=float, requires_grad=True, device=DEVICE)
    val = wp.array(rng.random((2, N)), dtype=float, requires_grad=True, device=DEVICE)
    row = wp.array(rng.random(N), dtype=float, requires_grad=True, device=DEVICE)
    dst = wp.zeros((M, N), dtype=float, requires_grad=True, device=DEVICE)
    weights = wp.array(weights_np, dtype=float, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch_tiled(patch, dim=[1], inputs=[src, val, row], outputs=[dst], block_dim=32, device=DEVICE)
        wp.launch(objective, dim=(M, N), inputs=[dst, weights], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    expected = weights_np.copy()
    expected[0:2, :] = 0.0
    expected[3] = 0.0
    return {"grad": src.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
