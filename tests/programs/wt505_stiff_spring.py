"""WT505: a correct gradient and a step size too large for a stiff spring.

Gradient descent relaxes a chain of six particles joined by springs; one spring is 100 times
stiffer than the others. The gradient is exact, but the step size 0.013 is above 2/L for the
stiff spring's mode (L = the largest curvature, about 201): the soft modes settle for a few
steps while the stiff mode grows by a factor |1 - 0.013 L| = 1.6 per step, until the energy,
a sum of squares, overflows float32. The kernel that overflows is innocent (its inputs are
around 1e18 by then): no WT501, one divergence warning at the update, with the curvature
along the path (step size 0.013 above 2/L = 0.00995).
"""
# check-numerics
# grad: right

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
N = 6
STEPS = 110
LR = 0.013
STIFFNESS = np.array([1.0, 1.0, 100.0, 1.0, 1.0], dtype=np.float32)


@wp.kernel
def spring_energy(x: wp.array(dtype=float), k: wp.array(dtype=float), energy: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i + 1] - x[i] - 1.0
    wp.atomic_add(energy, 0, 0.5 * k[i] * d * d)


@wp.kernel
def anchor(x: wp.array(dtype=float), energy: wp.array(dtype=float)):
    wp.atomic_add(energy, 0, 0.5 * x[0] * x[0])


@wp.kernel
def descend(x: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * grad[i]


def true_grad(x: np.ndarray) -> np.ndarray:
    g = np.zeros_like(x)
    g[0] += x[0]
    for i in range(N - 1):
        d = x[i + 1] - x[i] - 1.0
        g[i + 1] += STIFFNESS[i] * d
        g[i] -= STIFFNESS[i] * d
    return g


def run() -> dict:
    x0 = np.array([0.3, 1.0, 2.2, 3.201, 3.9, 5.4], dtype=np.float32)
    x = wp.array(x0, dtype=float, requires_grad=True, device=DEVICE)
    k = wp.array(STIFFNESS, dtype=float, device=DEVICE)
    energy = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    first = None
    for _ in range(STEPS):
        energy.zero_()
        tape.reset()
        with tape:
            wp.launch(anchor, dim=1, inputs=[x], outputs=[energy], device=DEVICE)
            wp.launch(spring_energy, dim=N - 1, inputs=[x, k], outputs=[energy], device=DEVICE)
        tape.backward(energy)
        if first is None:
            first = (x.grad.numpy().copy(), true_grad(x.numpy().astype(np.float64)))
        wp.launch(descend, dim=N, inputs=[x, x.grad, LR], device=DEVICE)  # expect: WT505
        tape.zero()
    return {"grad": first[0], "expected": first[1]}


if __name__ == "__main__":
    run()
