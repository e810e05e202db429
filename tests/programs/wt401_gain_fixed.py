"""WT401 fixed: the gained signal goes to its own array; the adjoint is exact."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def apply_gain(signal: wp.array[float], gain: wp.array[float], out: wp.array[float]):
    i = wp.tid()
    out[i] = signal[i] * gain[0]


@wp.kernel
def energy(signal: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, signal[i] * signal[i])


def run() -> dict:
    x_np = np.array([1.0, 2.0, 3.0])
    signal = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    gain = wp.array([2.0], dtype=float, requires_grad=True, device=DEVICE)
    out = wp.zeros(3, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(apply_gain, 3, [signal, gain, out], device=DEVICE)
        wp.launch(energy, 3, [out, loss], device=DEVICE)
    tape.backward(loss)
    expected = np.array([2.0 * 2.0 * np.sum(x_np**2)])
    return {"grad": gain.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
