"""WT401 as info: the in-place gain runs on a backpropagated tape, but off the loss's path.

``damp`` updates a diagnostic copy of the velocity in place on the same tape as the
loss; nothing the loss depends on reads it, so no gradient flows through the pattern in
this run. The report keeps it as `info` and says that the tape is backpropagated but no
recorded launch links the kernel to the loss (not "never backpropagated").
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
# grad: right


@wp.kernel
def damp(velocity: wp.array[float], factor: wp.array[float]):
    i = wp.tid()
    velocity[i] *= factor[0]  # expect: WT401


@wp.kernel
def energy(velocity: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    wp.atomic_add(loss, 0, velocity[i] * velocity[i])


def run() -> dict:
    v0 = np.array([1.0, 2.0])
    velocity = wp.array(v0, dtype=float, requires_grad=True, device=DEVICE)
    shown = wp.array(v0, dtype=float, requires_grad=True, device=DEVICE)
    factor = wp.array([0.5], dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(damp, 2, [shown, factor], device=DEVICE)
        wp.launch(energy, 2, [velocity], [loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": velocity.grad.numpy().copy(), "expected": 2.0 * v0}


if __name__ == "__main__":
    run()
