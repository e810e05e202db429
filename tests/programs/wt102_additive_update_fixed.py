"""Fixed twin of wt102_additive_update: the advanced velocity goes to its own array, so the
adjoint of the score line re-reads the velocity the forward pass used."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
DT = 0.5


@wp.kernel
def score_and_advance(
    w: wp.array[float],
    a: wp.array[float],
    v: wp.array[float],
    score: wp.array[float],
    v_next: wp.array[float],
):
    i = wp.tid()
    wp.atomic_add(score, 0, w[i] * v[i])
    v_next[i] = v[i] + DT * a[i]


def run() -> dict:
    w_np = np.array([0.5, -1.0, 2.0])
    v_np = np.array([1.0, 3.0, -2.0])
    a_np = np.array([4.0, -2.0, 6.0])
    w = wp.array(w_np, dtype=float, requires_grad=True, device=DEVICE)
    a = wp.array(a_np, dtype=float, device=DEVICE)
    v = wp.array(v_np, dtype=float, requires_grad=True, device=DEVICE)
    v_next = wp.zeros(3, dtype=float, requires_grad=True, device=DEVICE)
    score = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(score_and_advance, 3, [w, a, v, score, v_next], device=DEVICE)
    tape.backward(score)
    return {"grad": w.grad.numpy().copy(), "expected": v_np}


if __name__ == "__main__":
    run()
