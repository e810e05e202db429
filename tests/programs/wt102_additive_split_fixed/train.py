"""Fixed twin of wt102_additive_split: the damped velocities are written to a new array."""

import numpy as np
import warp as wp
from wt102_particles_fixed import Particles

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def energy_and_damp(
    mass: wp.array[float], v: wp.array[float], energy: wp.array[float], v_next: wp.array[float]
):
    i = wp.tid()
    wp.atomic_add(energy, 0, Particles.kinetic(mass, v, i))
    v_next[i] = v[i] - 0.25


def run() -> dict:
    m_np = np.array([1.0, 2.0, 0.5])
    v_np = np.array([2.0, -1.0, 3.0])
    mass = wp.array(m_np, dtype=float, requires_grad=True, device=DEVICE)
    v = wp.array(v_np, dtype=float, requires_grad=True, device=DEVICE)
    v_next = wp.zeros(3, dtype=float, requires_grad=True, device=DEVICE)
    energy = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(energy_and_damp, 3, [mass, v, energy, v_next], device=DEVICE)
    tape.backward(energy)
    return {"grad": mass.grad.numpy().copy(), "expected": 0.5 * v_np**2}


if __name__ == "__main__":
    run()
