"""WT102, an additive update that another statement's adjoint needs: a kernel scores each
particle with its velocity and then advances the velocity in place (`v[i] += dt * a[i]`).

The `+=` is exact by itself, but the adjoint of the score line re-reads `v[i]` from memory,
where it now holds the advanced velocity: d loss / d w[i] comes out v[i] + dt * a[i]
instead of v[i] (verified on Warp 1.19).
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
DT = 0.5


@wp.kernel
def score_and_advance(w: wp.array[float], a: wp.array[float], v: wp.array[float], score: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(score, 0, w[i] * v[i])
    v[i] += DT * a[i]


def run() -> dict:
    w_np = np.array([0.5, -1.0, 2.0])
    v_np = np.array([1.0, 3.0, -2.0])
    a_np = np.array([4.0, -2.0, 6.0])
    w = wp.array(w_np, dtype=float, requires_grad=True, device=DEVICE)
    a = wp.array(a_np, dtype=float, device=DEVICE)
    v = wp.array(v_np, dtype=float, requires_grad=True, device=DEVICE)
    score = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(score_and_advance, 3, [w, a, v, score], device=DEVICE)  # expect: WT102
    tape.backward(score)
    return {"grad": w.grad.numpy().copy(), "expected": v_np}


if __name__ == "__main__":
    run()
