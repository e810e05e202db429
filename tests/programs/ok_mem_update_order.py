"""Additive updates of an array the same kernel reads, none of which an adjoint gets wrong
(no finding above info): the update comes *before* the read (`v[i] += dt * a[i]` then the
score reads the new `v[i]`), the value read is used only linearly (`score += 2 * v[i]`
before `v[i] += ...`), and the read and the update hit different constant elements
(`b[0]` read, `b[1]` updated)."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
DT = 0.5


@wp.kernel
def advance_then_score(w: wp.array[float], a: wp.array[float], v: wp.array[float], score: wp.array[float]):
    i = wp.tid()
    v[i] += DT * a[i]
    wp.atomic_add(score, 0, w[i] * v[i])


@wp.kernel
def linear_then_advance(w: wp.array[float], a: wp.array[float], v: wp.array[float], score: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(score, 0, 2.0 * v[i] + w[i])
    v[i] += DT * a[i]


@wp.kernel
def other_element(w: wp.array[float], a: wp.array[float], b: wp.array[float], score: wp.array[float]):
    score[0] = w[0] * b[0]
    b[1] += a[0]


def run() -> dict:
    w_np = np.array([0.5, -1.0, 2.0])
    v_np = np.array([1.0, 3.0, -2.0])
    a_np = np.array([4.0, -2.0, 6.0])
    grads = []
    for kernel in (advance_then_score, linear_then_advance, other_element):
        w = wp.array(w_np, dtype=float, requires_grad=True, device=DEVICE)
        a = wp.array(a_np, dtype=float, device=DEVICE)
        v = wp.array(v_np, dtype=float, requires_grad=True, device=DEVICE)
        score = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        tape = wp.Tape()
        with tape:
            wp.launch(kernel, 3 if kernel is not other_element else 1, [w, a, v, score], device=DEVICE)
        tape.backward(score)
        grads.append(w.grad.numpy().copy())
        grads.append(v.grad.numpy().copy())
    expected = [
        v_np + DT * a_np,
        w_np,
        np.ones(3),
        np.full(3, 2.0),
        np.array([v_np[0], 0.0, 0.0]),
        np.array([w_np[0], 0.0, 0.0]),
    ]
    return {"grad": np.concatenate(grads), "expected": np.concatenate(expected)}


if __name__ == "__main__":
    run()
