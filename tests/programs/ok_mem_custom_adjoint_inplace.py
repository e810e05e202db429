"""A @wp.func with a custom adjoint that solves in place (like Newton's `dense_solve`): the
forward substitution reads and overwrites `x`, but Warp never differentiates that body; the
custom adjoint reads the solution `x` after the call, which is what it was written for.
Exact, and not an in-place overwrite (no finding above info)."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.func
def solve_lower(n: int, L: wp.array[float], b: wp.array[float], x: wp.array[float]):
    for i in range(n):
        s = b[i]
        for j in range(i):
            s -= L[i * n + j] * x[j]
        x[i] = s / L[i * n + i]
    for i in range(n):  # a second pass in place: x[i] = x[i] * 1 (reads and stores x[i])
        x[i] = x[i] * 1.0


@wp.func_grad(solve_lower)
def adj_solve_lower(n: int, L: wp.array[float], b: wp.array[float], x: wp.array[float]):
    # L^T adj_b = adj_x: backward substitution on the upper triangle
    for ii in range(n):
        i = n - 1 - ii
        s = wp.adjoint[x][i]
        for j in range(i + 1, n):
            s -= L[j * n + i] * wp.adjoint[b][j]
        wp.adjoint[b][i] += s / L[i * n + i]


@wp.kernel
def solve(n: int, L: wp.array[float], b: wp.array[float], x: wp.array[float]):
    solve_lower(n, L, b, x)


@wp.kernel
def weighted(values: wp.array[float], weights: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, weights[i] * values[i])


def run() -> dict:
    L_np = np.array([[2.0, 0.0, 0.0], [1.0, 3.0, 0.0], [-1.0, 0.5, 1.5]])
    b_np = np.array([1.0, -2.0, 0.5])
    w_np = np.array([1.0, 0.5, -2.0])
    L = wp.array(L_np.ravel(), dtype=float, device=DEVICE)
    b = wp.array(b_np, dtype=float, requires_grad=True, device=DEVICE)
    x = wp.zeros(3, dtype=float, requires_grad=True, device=DEVICE)
    w = wp.array(w_np, dtype=float, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(solve, 1, [3, L, b, x], device=DEVICE)
        wp.launch(weighted, 3, [x, w, loss], device=DEVICE)
    tape.backward(loss)
    expected = np.linalg.solve(L_np.T, w_np)
    return {"grad": b.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
