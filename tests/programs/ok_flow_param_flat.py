"""Look-alike of WT310: a parameter on the tape's way to the loss whose gradient is legitimately zero.

``level`` reaches the loss only through ``wp.floor``: the derivative is zero almost
everywhere, so ``level.grad`` is zero, and correctly so (WT408 says so, as info). It is not an
array the tapes never read: the kernel the loss depends on reads it. ``gain`` carries a
non-zero gradient next to it.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def staircase(x: wp.array(dtype=float), level: wp.array(dtype=float), gain: wp.array(dtype=float),
              loss: wp.array(dtype=float)):  # fmt: skip
    i = wp.tid()
    step = wp.floor(x[i] + level[0])
    wp.atomic_add(loss, 0, gain[0] * step)


def run() -> dict:
    x_np = np.array([0.2, 1.4, 2.7], dtype=np.float32)
    x = wp.array(x_np, dtype=float, device=DEVICE)
    level = wp.array([0.25], dtype=float, requires_grad=True, device=DEVICE)
    gain = wp.array([2.0], dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(staircase, 3, inputs=[x, level, gain], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    grads = np.concatenate([level.grad.numpy(), gain.grad.numpy()])
    expected = np.array([0.0, float(np.sum(np.floor(x_np + 0.25)))])
    return {"grad": grads, "expected": expected}


if __name__ == "__main__":
    run()
