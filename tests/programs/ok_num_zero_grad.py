"""Look-alike of WT503: a gradient that is legitimately zero at this point.

The bias sits behind a ReLU whose inputs are all negative here: the loss depends on it
through the recorded graph, and its exact gradient is zero. The adjoint does reach it
(and adds zeros), so nothing is dead.
"""
# check-numerics

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def relu_layer(x: wp.array(dtype=float), bias: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.max(x[i] + bias[0], 0.0)


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i])


def run() -> dict:
    x = wp.array(np.array([-3.0, -2.0, -5.0], dtype=np.float32), dtype=float, device=DEVICE)
    bias = wp.array([0.5], dtype=float, requires_grad=True, device=DEVICE)
    y = wp.zeros(3, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(relu_layer, dim=3, inputs=[x, bias], outputs=[y], device=DEVICE)
        wp.launch(total, dim=3, inputs=[y], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": bias.grad.numpy().copy(), "expected": np.zeros(1)}


if __name__ == "__main__":
    run()
