"""Fixed twin of wt504_jacobi: the Jacobi solve runs to convergence (60 sweeps).

``solve`` runs 60 Jacobi sweeps for a diagonally dominant tridiagonal system, each sweep
a launch reading the previous iterate and writing a fresh one (so the tape keeps them
all), with the right-hand side unchanged. The sweeps contract by about 0.6 each, so the
last change is negligible next to the solution: the gradient with respect to ``rhs`` is
that of the solution of the system (``run`` compares it with the transposed solve).
"""
# check-numerics

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
N = 8
DIAG, OFF = 4.0, 1.2
SWEEPS = 60


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


def solve(rhs, sweeps):
    iterates = [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(sweeps + 1)]
    for k in range(sweeps):
        x, x_next = iterates[k], iterates[k + 1]
        wp.launch(jacobi, dim=N, inputs=[x, rhs], outputs=[x_next], device=DEVICE)
    return iterates[-1]


def run() -> dict:
    rhs = wp.array(np.linspace(1.0, 2.0, N, dtype=np.float32), dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        x = solve(rhs, SWEEPS)
        wp.launch(total, dim=N, inputs=[x], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    matrix = DIAG * np.eye(N) - OFF * (np.eye(N, k=1) + np.eye(N, k=-1))
    expected = np.linalg.solve(matrix.T, np.ones(N))
    return {"grad": rhs.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
