"""WT101 inside a library: one solver reused across taped steps overwrites its own work buffer.

``minisolver.Solver`` (an installed-package stand-in under ``site-packages/``) keeps
``self.work``, allocated once when the solver is built, and rewrites it in every ``step``.
The tape records all the steps; at ``tape.backward()`` the buffer holds the last step's
values, so the adjoint of every earlier step reads the wrong ``work`` (Newton's
``SolverFeatherstone`` reused across steps does the same with its ``M``/``J``/``H``/``L``
buffers). The finding points at the user's ``solver.step(...)`` line, with the library's
launch beside it and the solver's construction as the allocation.
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
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i])


def true_grad(x0: np.ndarray) -> np.ndarray:
    x, jac = x0.astype(np.float64), np.ones_like(x0, dtype=np.float64)
    for _ in range(STEPS):
        jac = jac * (1.0 + DT * np.cos(x * x) * 2.0 * x)
        x = x + DT * np.sin(x * x)
    return jac


def run() -> dict:
    x0_np = np.array([0.3, 0.8, 1.1, -0.6], dtype=np.float32)
    states = [wp.array(x0_np, dtype=float, requires_grad=True, device=DEVICE)]
    states += [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(STEPS)]
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    solver = minisolver.Solver(N, DEVICE)
    tape = wp.Tape()
    with tape:
        for k in range(STEPS):
            solver.step(states[k], states[k + 1], solver.control(), DT)  # expect: WT101
        wp.launch(total, N, inputs=[states[-1]], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": states[0].grad.numpy().copy(), "expected": true_grad(x0_np)}


if __name__ == "__main__":
    run()
