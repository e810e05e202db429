"""Look-alike of WT309: a quantity computed once from an array with a gradient, outside the
tape, on purpose.

``inv_mass`` is computed from ``mass`` before the tape (a model's setup, as Newton's builder
does); ``mass`` has ``requires_grad`` because the model makes every array differentiable,
but the program optimizes the push ``force`` and never reads ``mass.grad``. The backward
stops at ``inv_mass`` and nothing is lost that anyone uses: ``force``'s gradient is right.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def inverse(mass: wp.array(dtype=float), inv_mass: wp.array(dtype=float)):
    i = wp.tid()
    inv_mass[i] = 1.0 / mass[i]


@wp.kernel
def push(force: wp.array(dtype=float), inv_mass: wp.array(dtype=float), v: wp.array(dtype=float)):
    i = wp.tid()
    v[i] = force[i] * inv_mass[i]


@wp.kernel
def energy(v: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, 0.5 * v[i] * v[i])


def run() -> dict:
    mass_np = np.array([1.0, 2.0, 4.0])
    force_np = np.array([1.0, -1.0, 2.0])
    mass = wp.array(mass_np, dtype=float, requires_grad=True, device=DEVICE)
    inv_mass = wp.zeros(3, dtype=float, requires_grad=True, device=DEVICE)
    wp.launch(inverse, dim=3, inputs=[mass], outputs=[inv_mass], device=DEVICE)
    force = wp.array(force_np, dtype=float, requires_grad=True, device=DEVICE)
    v = wp.zeros(3, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(push, dim=3, inputs=[force, inv_mass], outputs=[v], device=DEVICE)
        wp.launch(energy, dim=3, inputs=[v], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": force.grad.numpy().copy(), "expected": force_np / mass_np**2}


if __name__ == "__main__":
    run()
