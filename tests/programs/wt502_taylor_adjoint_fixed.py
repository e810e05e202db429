"""Fixed twin of wt502_taylor_adjoint: the custom adjoint is the exact derivative.

``wave(x) = sin(x)`` gets a hand-written adjoint ``1 - x^2/2``, the first two terms of
``cos(x)``: off by a few percent at the values the program uses, which float32 finite
differences (noisy to a few percent at a usable step) cannot tell from cancellation.
Central differences of a float64 copy of ``wave`` can.
"""
# check-numerics

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.func
def wave(x: float):
    return wp.sin(x)


@wp.func_grad(wave)
def adj_wave(x: float, adj_ret: float):
    wp.adjoint[x] += adj_ret * wp.cos(x)


@wp.kernel
def signal(phase: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = wave(phase[i])


@wp.kernel
def total(out: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, out[i])


def run() -> dict:
    p_np = np.array([0.2, 0.5, 0.9, 0.7], dtype=np.float32)
    phase = wp.array(p_np, dtype=float, requires_grad=True, device=DEVICE)
    out = wp.zeros(4, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(signal, dim=4, inputs=[phase], outputs=[out], device=DEVICE)
        wp.launch(total, dim=4, inputs=[out], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": phase.grad.numpy().copy(), "expected": np.cos(p_np.astype(np.float64))}


if __name__ == "__main__":
    run()
