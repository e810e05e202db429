"""WT301 fixed twin: the struct's ``strain`` field is allocated with ``requires_grad=True``."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.struct
class Springs:
    rest: wp.array(dtype=float)
    stiffness: wp.array(dtype=float)
    strain: wp.array(dtype=float)


@wp.kernel
def compute_strain(x: wp.array(dtype=float), springs: Springs):
    i = wp.tid()
    length = x[i + 1] - x[i]
    springs.strain[i] = (length - springs.rest[i]) / springs.rest[i]


@wp.kernel
def elastic_energy(springs: Springs, loss: wp.array(dtype=float)):
    i = wp.tid()
    e = springs.strain[i]
    wp.atomic_add(loss, 0, 0.5 * springs.stiffness[i] * e * e)


def make_springs(rest_np, k_np):
    springs = Springs()
    springs.rest = wp.array(rest_np, dtype=float, device=DEVICE)
    springs.stiffness = wp.array(k_np, dtype=float, requires_grad=True, device=DEVICE)
    springs.strain = wp.zeros(len(rest_np), dtype=float, requires_grad=True, device=DEVICE)
    return springs


def run() -> dict:
    x_np = np.array([0.0, 1.2, 1.9, 3.4])
    rest_np = np.array([1.0, 1.0, 1.0])
    k_np = np.array([10.0, 20.0, 5.0])
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    springs = make_springs(rest_np, k_np)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(compute_strain, dim=3, inputs=[x, springs], device=DEVICE)
        wp.launch(elastic_energy, dim=3, inputs=[springs], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    strain = (np.diff(x_np) - rest_np) / rest_np
    force = k_np * strain / rest_np  # dE/dlength per spring
    expected = np.zeros_like(x_np)
    expected[:-1] -= force
    expected[1:] += force
    return {"grad": x.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
