"""WT401: a gain applied in place, `x[i] *= gain[0]`, on a backpropagated tape.

The adjoint of an in-place product on an array element reads the element after the
store: d loss / d gain comes out twice too large (loss = sum((x * gain)^2)).
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def apply_gain(signal: wp.array[float], gain: wp.array[float]):
    i = wp.tid()
    signal[i] *= gain[0]  # expect: WT401


@wp.kernel
def energy(signal: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, signal[i] * signal[i])


def run() -> dict:
    x_np = np.array([1.0, 2.0, 3.0])
    signal = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    gain = wp.array([2.0], dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(apply_gain, 3, [signal, gain], device=DEVICE)
        wp.launch(energy, 3, [signal, loss], device=DEVICE)
    tape.backward(loss)
    expected = np.array([2.0 * 2.0 * np.sum(x_np**2)])
    return {"grad": gain.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
