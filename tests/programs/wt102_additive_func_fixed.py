"""Fixed twin of wt102_additive_func: the nudges go to a separate array of displacements."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.func
def stretch_of(x: wp.array[float], i: int, rest: float):
    return x[i + 1] - x[i] - rest


@wp.func
def spring_energy(x: wp.array[float], i: int, rest: float):
    stretch = stretch_of(x, i, rest)
    return 0.5 * stretch * stretch


@wp.kernel
def relax(x: wp.array[float], rest: float, energy: wp.array[float], dx: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(energy, 0, spring_energy(x, i, rest))
    wp.atomic_add(dx, i, 0.1)


def run() -> dict:
    x_np = np.array([0.0, 1.5, 2.2, 4.0])
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    dx = wp.zeros(4, dtype=float, device=DEVICE)
    energy = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(relax, 3, [x, 1.0, energy, dx], device=DEVICE)
    tape.backward(energy)
    stretch = np.diff(x_np) - 1.0
    expected = np.zeros_like(x_np)
    expected[:-1] -= stretch
    expected[1:] += stretch
    return {"grad": x.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
