"""WT310: the program fills its own control from the parameters, then passes ``None`` to the solver.

``forces`` are the parameters; a taped kernel copies them into ``control.force``, but the
``solver.step(...)`` call passes ``control=None`` and the library (``minisolver``, like
Newton's solvers) builds a default control of its own, with zero forces. Nothing the loss
depends on reads ``control.force``: the backward never reaches ``forces`` and its gradient
is exactly zero. The finding points at the parameters (where they were last written) and
says that their values stop at ``control.force``.
"""

import os
import sys

import numpy as np
import warp as wp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))
import minisolver  # noqa: E402

wp.config.quiet = True
DEVICE = "cpu"
N, STEPS, DT = 4, 3, 0.1


@wp.kernel
def set_forces(forces: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = forces[i]


@wp.kernel
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i])


def true_grad(x0: np.ndarray, f: np.ndarray) -> np.ndarray:
    x, dx_df = x0.astype(np.float64), np.zeros_like(x0, dtype=np.float64)
    for _ in range(STEPS):
        dx_df = dx_df * (1.0 + DT * np.cos(x * x) * 2.0 * x) + DT
        x = x + DT * (np.sin(x * x) + f)
    return dx_df


def run() -> dict:
    x0_np = np.array([0.3, 0.8, 1.1, -0.6], dtype=np.float32)
    f_np = np.zeros(N, dtype=np.float32)
    forces = wp.array(f_np, dtype=float, requires_grad=True, device=DEVICE)  # expect: WT310
    states = [wp.array(x0_np, dtype=float, requires_grad=True, device=DEVICE)]
    states += [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(STEPS)]
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        for k in range(STEPS):
            solver = minisolver.Solver(N, DEVICE)
            control = solver.control()
            wp.launch(set_forces, N, inputs=[forces], outputs=[control.force], device=DEVICE)
            solver.step(states[k], states[k + 1], None, DT)
        wp.launch(total, N, inputs=[states[-1]], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": forces.grad.numpy().copy(), "expected": true_grad(x0_np, f_np)}


if __name__ == "__main__":
    run()
