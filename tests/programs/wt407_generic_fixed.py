"""WT407 fixed: the generic magnitude returns early at a zero vector; the square root only
sees positive arguments and the collapsed segment contributes no gradient."""

from typing import Any

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.func
def magnitude(v: Any):
    d2 = wp.dot(v, v)
    if d2 == 0.0:
        return 0.0 * d2
    return wp.sqrt(d2)


@wp.func
def gap(a: Any, b: Any):
    return magnitude(b - a)


@wp.kernel
def track_length(markers: wp.array[wp.vec2], loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, gap(markers[i], markers[i + 1]))


def run() -> dict:
    m_np = np.array([[0.0, 0.0], [3.0, 4.0], [3.0, 4.0]])
    markers = wp.array(m_np, dtype=wp.vec2, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(track_length, 2, [markers, loss], device=DEVICE)
    tape.backward(loss)
    expected = np.array([[-0.6, -0.8], [0.6, 0.8], [0.0, 0.0]])
    return {"grad": markers.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
