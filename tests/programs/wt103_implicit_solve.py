"""WT103: a state solved outside the tape, after a recorded launch read it, never declared to the tape.

The implicit-function pattern of Warp's FEM optimization examples without its last step:
``residual`` is recorded with the state ``x`` still zero (``rhs = f - k * x``), ``x`` is
then solved outside the tape (``x = rhs / k``), and the loss reads ``x``. The solve is
not declared to the tape (no ``tape.record_func`` with its adjoint), so the backward
sees an unrecorded mutation: the residual's adjoint runs against the solved ``x``, and
no gradient flows from the loss through the solve to ``k``.
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
    wp.launch(solve, dim=N, inputs=[rhs, k], outputs=[x], device=DEVICE)  # expect: WT103, WT309
    with tape:
        wp.launch(objective, dim=N, inputs=[x], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    # loss = sum((f / k)^2): d/dk = -2 f^2 / k^3
    return {"grad": k.grad.numpy().copy(), "expected": -2.0 * f0**2 / k0**3}


if __name__ == "__main__":
    run()
