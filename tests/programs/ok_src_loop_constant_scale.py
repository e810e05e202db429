"""Look-alike (fine): a dynamic loop that scales the carried value by constants.

``decay`` runs ``steps`` iterations (a runtime count: Warp does not unroll the loop) of
``v *= DECAY``, ``v = v * gain + BIAS`` and ``v = v / 2.0``. The value is carried from one
iteration to the next, but only scaled by what is the same in every iteration (module
constants, a literal, the kernel's scalar argument ``gain``): the adjoint of each step is
the same scaling whatever ``v`` holds, so replaying the iterations from the final value
gives the exact gradient. (``p *= x[k]``, a product with values that change, is WT403.)
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
# forbid-info

DECAY = wp.constant(0.9)
BIAS = wp.constant(0.5)
STEPS = 5
GAIN = 1.5


@wp.kernel
def decay(x: wp.array(dtype=float), steps: int, gain: float, out: wp.array(dtype=float)):
    i = wp.tid()
    v = x[i]
    for _ in range(steps):
        v *= DECAY
        v = v * gain + BIAS
        v = v / 2.0
    out[i] = v


@wp.kernel
def total(out: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, out[i] * out[i])


def run() -> dict:
    x_np = np.array([1.0, -2.0, 0.5])
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    out = wp.zeros(3, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(decay, dim=3, inputs=[x, STEPS, GAIN], outputs=[out], device=DEVICE)
        wp.launch(total, dim=3, inputs=[out], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    v = x_np.copy()
    for _ in range(STEPS):
        v = (v * 0.9 * GAIN + 0.5) / 2.0
    scale = (0.9 * GAIN / 2.0) ** STEPS
    return {"grad": x.grad.numpy().copy(), "expected": 2.0 * v * scale}


if __name__ == "__main__":
    run()
