"""Fixed twin of wt103_implicit_solve: the solve is declared to the tape with its adjoint.

``tape.record_func(adjoint_solve, arrays=(rhs, x))`` tells the tape that ``x`` now holds
the solution of ``k * x = rhs``; its backward maps ``x.grad`` to ``rhs.grad`` (``k`` is
diagonal, so ``k^-T x.grad = x.grad / k``). The residual's adjoint then runs against the
solved ``x``, as the implicit function theorem wants: ``k.grad = -x * rhs.grad``.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 3


@wp.kernel
def residual(
    f: wp.array(dtype=float), k: wp.array(dtype=float), x: wp.array(dtype=float), rhs: wp.array(dtype=float)
):
    i = wp.tid()
    rhs[i] = f[i] - k[i] * x[i]


@wp.kernel
def solve(rhs: wp.array(dtype=float), k: wp.array(dtype=float), x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = rhs[i] / k[i]


@wp.kernel
def objective(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


def run() -> dict:
    f0 = np.array([1.0, 2.0, -1.0])
    k0 = np.array([2.0, 4.0, 0.5])

    f = wp.array(f0, dtype=float, device=DEVICE)
    k = wp.array(k0, dtype=float, requires_grad=True, device=DEVICE)
    x = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    rhs = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(residual, dim=N, inputs=[f, k, x], outputs=[rhs], device=DEVICE)
    wp.launch(solve, dim=N, inputs=[rhs, k], outputs=[x], device=DEVICE)

    def adjoint_solve():
        wp.launch(solve, dim=N, inputs=[x.grad, k], outputs=[rhs.grad], device=DEVICE)
        x.grad.zero_()

    tape.record_func(adjoint_solve, arrays=(rhs, x))
    with tape:
        wp.launch(objective, dim=N, inputs=[x], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    return {"grad": k.grad.numpy().copy(), "expected": -2.0 * f0**2 / k0**3}


if __name__ == "__main__":
    run()
