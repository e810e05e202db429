"""WT102 through nested @wp.funcs: a spring's energy read from the positions in a function
(through a second one), then the positions nudged by the kernel (`wp.atomic_add` on the
element the function read).

The nudge is exact by itself, but the adjoint of the energy (a square of the stretch)
re-reads `x[i]` after the nudge: the gradient is that of the nudged stretch.
"""

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
def relax(x: wp.array[float], rest: float, energy: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(energy, 0, spring_energy(x, i, rest))
    wp.atomic_add(x, i, 0.1)


def run() -> dict:
    x_np = np.array([0.0, 1.5, 2.2, 4.0])
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    energy = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(relax, 3, [x, 1.0, energy], device=DEVICE)  # expect: WT102
    tape.backward(energy)
    stretch = np.diff(x_np) - 1.0
    expected = np.zeros_like(x_np)
    expected[:-1] -= stretch
    expected[1:] += stretch
    return {"grad": x.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
