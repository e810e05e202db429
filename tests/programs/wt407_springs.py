"""WT407: spring lengths with `wp.sqrt(wp.dot(d, d))`; one spring starts collapsed.

Two particles of spring 1 coincide: sqrt(0) = 0 is finite, but its derivative is
infinite and the adjoint is NaN, which spreads into d loss / d positions.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.func
def spring_length(a: wp.vec3, b: wp.vec3):
    d = b - a
    return wp.sqrt(wp.dot(d, d))  # expect: WT407


@wp.kernel
def spring_energy(
    positions: wp.array[wp.vec3], springs: wp.array[wp.vec2i], rest: wp.array[float], loss: wp.array[float]
):
    s = wp.tid()
    ends = springs[s]
    stretch = spring_length(positions[ends[0]], positions[ends[1]]) - rest[s]
    wp.atomic_add(loss, 0, stretch)


def run() -> dict:
    p_np = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    positions = wp.array(p_np, dtype=wp.vec3, requires_grad=True, device=DEVICE)
    springs = wp.array([[0, 1], [1, 2]], dtype=wp.vec2i, device=DEVICE)
    rest = wp.array([0.5, 0.0], dtype=float, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(spring_energy, 2, [positions, springs, rest, loss], device=DEVICE)
    tape.backward(loss)
    # spring 0 pulls along x; the collapsed spring 1 contributes no direction (subgradient 0)
    expected = np.array([[-1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    return {"grad": positions.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
