"""Look-alike: in-place products outside the tape and on locals.

The optimizer's weight decay `weights[i] *= decay` runs after the backward, off the tape;
the taped kernel scales a local (`scale *= 0.5`). Gradients are exact; nothing may be
reported.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
# forbid-info


@wp.kernel
def predict(weights: wp.array[float], inputs: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    scale = weights[i]
    scale *= 0.5
    wp.atomic_add(loss, 0, scale * inputs[i])


@wp.kernel
def decay_step(weights: wp.array[float], grads: wp.array[float], lr: float, decay: float):
    i = wp.tid()
    weights[i] -= lr * grads[i]
    weights[i] *= decay


def run() -> dict:
    x_np = np.array([1.0, 2.0, 3.0])
    weights = wp.array([0.1, 0.2, 0.3], dtype=float, requires_grad=True, device=DEVICE)
    inputs = wp.array(x_np, dtype=float, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    first = None
    for _ in range(2):
        tape = wp.Tape()
        with tape:
            wp.launch(predict, 3, [weights, inputs, loss], device=DEVICE)
        tape.backward(loss)
        if first is None:
            first = weights.grad.numpy().copy()
        wp.launch(decay_step, 3, [weights, weights.grad, 0.01, 0.99], device=DEVICE)
        tape.zero()
        loss.zero_()
    return {"grad": first, "expected": 0.5 * x_np}


if __name__ == "__main__":
    run()
