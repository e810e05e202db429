"""WT407 through nested generic @wp.funcs: `magnitude(v: Any)` takes `wp.sqrt(wp.dot(v, v))`
and `gap(a: Any, b: Any)` calls it on `b - a`; two markers of the same track coincide, so
the square root sits at zero and the adjoint is NaN.
"""

from typing import Any

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.func
def magnitude(v: Any):
    return wp.sqrt(wp.dot(v, v))  # expect: WT407


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
