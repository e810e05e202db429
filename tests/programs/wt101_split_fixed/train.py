"""Fixed twin of wt101_split: the simulator allocates a contact-force buffer per step.

Entry point of the wt101_split_fixed program (simulator in wt101_split_fixed_sim.py).
"""

import numpy as np
import warp as wp
import wt101_split_fixed_sim as sim_module

wp.config.quiet = True

DEVICE = "cpu"
N = 3
STEPS = 5


@wp.kernel
def height_loss(q: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = q[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


def reference_loss(gravity, q0, v0, target):
    q = q0.astype(np.float64)
    v = v0.astype(np.float64)
    for _ in range(STEPS):
        fn = sim_module.KE * np.maximum(-q, 0.0) ** 2
        v = (v + sim_module.DT * (fn - gravity)) / (1.0 + sim_module.DT * sim_module.DAMPING * fn)
        q = q + sim_module.DT * v
    return np.sum((q - target) ** 2)


def run() -> dict:
    q0 = np.array([-0.05, -0.1, 0.02])
    v0 = np.array([-1.0, -0.5, -1.5])
    target = np.array([0.1, 0.1, 0.1])
    g0 = 3.0

    sim = sim_module.Simulator(N, DEVICE)
    gravity = wp.array([g0], dtype=float, requires_grad=True, device=DEVICE)
    state = (
        wp.array(q0, dtype=float, requires_grad=True, device=DEVICE),
        wp.array(v0, dtype=float, requires_grad=True, device=DEVICE),
    )
    target_wp = wp.array(target, dtype=float, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        for _ in range(STEPS):
            state = sim.step(state, gravity)
        wp.launch(height_loss, dim=N, inputs=[state[0], target_wp], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    eps = 1e-6
    expected = (reference_loss(g0 + eps, q0, v0, target) - reference_loss(g0 - eps, q0, v0, target)) / (
        2 * eps
    )
    return {"grad": gravity.grad.numpy().copy(), "expected": np.array([expected])}


if __name__ == "__main__":
    run()
