"""Fixed twin of wt503_copy_severed: the staging buffer has a gradient, the copy is taped.

The stiffness parameters are copied into a staging buffer that was allocated without
``requires_grad``; the copy is not recorded on the tape, so the backward never reaches
``stiffness``: its gradient ends exactly zero although the loss depends on it.
"""
# check-numerics

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def spring_energy(k: wp.array(dtype=float), stretch: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    s = stretch[i]
    wp.atomic_add(loss, 0, 0.5 * k[i] * s * s)


def run() -> dict:
    s_np = np.array([0.1, -0.2, 0.3], dtype=np.float32)
    stiffness = wp.array([10.0, 20.0, 30.0], dtype=float, requires_grad=True, device=DEVICE)
    stretch = wp.array(s_np, dtype=float, device=DEVICE)
    staged = wp.zeros(3, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.copy(staged, stiffness)
        wp.launch(spring_energy, dim=3, inputs=[staged, stretch], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": stiffness.grad.numpy().copy(), "expected": 0.5 * s_np.astype(np.float64) ** 2}


if __name__ == "__main__":
    run()
