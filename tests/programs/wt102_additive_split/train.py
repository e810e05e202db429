"""WT102 through a class's @wp.func method in another module: the kinetic energy is read
from the velocities by the method, then the kernel lowers the same velocity in place
(`v[i] -= c`).
The adjoint of the energy re-reads the damped velocity, so d energy / d mass comes out
0.5 (v - c)^2 instead of 0.5 v^2. Entry point of the wt102_additive_split program.
"""

import numpy as np
import warp as wp
from wt102_particles import Particles

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def energy_and_damp(mass: wp.array[float], v: wp.array[float], energy: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(energy, 0, Particles.kinetic(mass, v, i))
    v[i] -= 0.25


def run() -> dict:
    m_np = np.array([1.0, 2.0, 0.5])
    v_np = np.array([2.0, -1.0, 3.0])
    mass = wp.array(m_np, dtype=float, requires_grad=True, device=DEVICE)
    v = wp.array(v_np, dtype=float, requires_grad=True, device=DEVICE)
    energy = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(energy_and_damp, 3, [mass, v, energy], device=DEVICE)  # expect: WT102
    tape.backward(energy)
    return {"grad": mass.grad.numpy().copy(), "expected": 0.5 * v_np**2}


if __name__ == "__main__":
    run()
