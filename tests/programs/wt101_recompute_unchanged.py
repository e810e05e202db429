"""WT101 that stores unchanged values: a later launch recomputes an array an earlier one read.

``positions`` is computed from ``angles`` (``forward_kinematics``), read by ``energy``, and then
computed again from the same ``angles`` by another kernel before the backward, as Newton's
Featherstone solver recomputes a state's body poses at the start of the next step. The
overwrite stores the very values the reader saw, so the gradient is right today; without
value summaries it is reported as an error (nothing proves the values equal), with
``--check-numerics`` as a warning (the summaries prove it).
"""

# check-numerics
# grad: right

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def forward_kinematics(angles: wp.array(dtype=float), positions: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    positions[i] = wp.vec2(wp.cos(angles[i]), wp.sin(angles[i]))


@wp.kernel
def refresh_positions(angles: wp.array(dtype=float), positions: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    c = wp.cos(angles[i])
    s = wp.sin(angles[i])
    positions[i] = wp.vec2(c, s)


@wp.kernel
def energy(positions: wp.array(dtype=wp.vec2), loss: wp.array(dtype=float)):
    i = wp.tid()
    p = positions[i]
    wp.atomic_add(loss, 0, p[0] * p[1] + p[1] * p[1])


def run() -> dict:
    a_np = np.array([0.3, 0.9, -0.4], dtype=np.float32)
    angles = wp.array(a_np, dtype=float, requires_grad=True, device=DEVICE)
    positions = wp.zeros(3, dtype=wp.vec2, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(forward_kinematics, 3, inputs=[angles], outputs=[positions], device=DEVICE)
        wp.launch(energy, 3, inputs=[positions], outputs=[loss], device=DEVICE)
        wp.launch(refresh_positions, 3, inputs=[angles], outputs=[positions], device=DEVICE)  # expect: WT101
        wp.launch(energy, 3, inputs=[positions], outputs=[loss], device=DEVICE)  # the next step reads them
    tape.backward(loss)
    a = a_np.astype(np.float64)
    expected = 2.0 * (np.cos(2 * a) + 2 * np.sin(a) * np.cos(a))  # d/da 2 (cos a sin a + sin^2 a)
    return {"grad": angles.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
