"""Fixed twin of wt102_sin_inplace: the sine goes to a separate array."""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 4


@wp.kernel
def scale(u: wp.array(dtype=float), gain: wp.array(dtype=float), x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = gain[i] * u[i]


@wp.kernel
def wrap_phase(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.sin(x[i])


@wp.kernel
def total(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i])


def run() -> dict:
    u0 = np.array([0.5, 2.0, -1.5, 0.8])
    gain0 = np.array([1.2, 0.9, 1.1, 0.7])
    u = wp.array(u0, dtype=float, device=DEVICE)
    gain = wp.array(gain0, dtype=float, requires_grad=True, device=DEVICE)
    x = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    y = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(scale, dim=N, inputs=[u, gain], outputs=[x], device=DEVICE)
        wp.launch(wrap_phase, dim=N, inputs=[x], outputs=[y], device=DEVICE)
        wp.launch(total, dim=N, inputs=[y], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = np.cos(gain0 * u0) * u0
    return {"grad": gain.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
