"""WT504: a truncated Jacobi solve whose iterate buffers are allocated once and reused.

The same six-sweep solve as ``wt504_jacobi``, run once per optimisation step on a fresh
tape, but into iterate arrays allocated once for the whole run (as a solver object keeps
its scratch buffers). The second step's sweeps read those arrays too, yet they read what
that step wrote, not the first step's iterates: the loss still uses only each solve's last
iterate, and the gradient is that of six sweeps, not of the solution.
"""
# check-numerics

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
N = 8
DIAG, OFF = 4.0, 1.2
SWEEPS = 6
STEPS = 2


@wp.kernel
def jacobi(x: wp.array(dtype=float), rhs: wp.array(dtype=float), x_next: wp.array(dtype=float)):
    i = wp.tid()
    s = rhs[i]
    if i > 0:
        s += OFF * x[i - 1]
    if i < N - 1:
        s += OFF * x[i + 1]
    x_next[i] = s / DIAG


@wp.kernel
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i])


def run() -> dict:
    rhs = wp.array(np.linspace(1.0, 2.0, N, dtype=np.float32), dtype=float, requires_grad=True, device=DEVICE)
    iterates = [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(SWEEPS + 1)]
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    for _ in range(STEPS):
        tape = wp.Tape()
        with tape:
            for k in range(SWEEPS):
                wp.launch(  # expect: WT504
                    jacobi, dim=N, inputs=[iterates[k], rhs], outputs=[iterates[k + 1]], device=DEVICE
                )
            wp.launch(total, dim=N, inputs=[iterates[-1]], outputs=[loss], device=DEVICE)
        tape.backward(loss)
        grad = rhs.grad.numpy().copy()
        tape.zero()
        loss.zero_()
    matrix = DIAG * np.eye(N) - OFF * (np.eye(N, k=1) + np.eye(N, k=-1))
    expected = np.linalg.solve(matrix.T, np.ones(N))
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
