"""Look-alike of WT310: gradients read after a backward that did not write them, yet not zero.

Two shapes from Warp's own tests (test_grad, test_array), in one process after an unrelated training step:

- ``a.grad`` filled by an adjoint the program launches itself
  (``wp.launch(..., adjoint=True)``) after the tape's backward: no tape reads ``a``, but
  the read holds what that launch wrote;
- ``y.grad`` of the array seeded by ``tape.backward(grads={y: ...})``: the objective's own
  gradient, not a parameter's (Warp consumes the seed, so it reads zero after the backward;
  reusing it is WT311's question).
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def square_sum(w: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, w[i] * w[i])


@wp.kernel
def copy_kernel(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    b[i] = a[i]


@wp.kernel
def scale(x: wp.array(dtype=float), s: float, y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = s * x[i]


def run() -> dict:
    # an unrelated step first: its backward comes before every read below
    w = wp.array([1.0, 2.0], dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(square_sum, 2, inputs=[w], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    w_grad = w.grad.numpy().copy()

    # an adjoint launched by hand
    a = wp.array([-1.0, 2.0, 3.0], dtype=float, requires_grad=True, device=DEVICE)
    b = wp.zeros(3, dtype=float, requires_grad=True, device=DEVICE)
    wp.launch(copy_kernel, 3, inputs=[a, b], device=DEVICE)
    b.grad = wp.array([1.0, 1.0, 1.0], dtype=float, device=DEVICE)
    wp.launch(copy_kernel, 3, inputs=[a, b], adjoint=True, adj_inputs=[None, None], device=DEVICE)
    a_grad = a.grad.numpy().copy()

    # the gradient of the seeded output
    x_b = wp.ones(4, dtype=float, requires_grad=True, device=DEVICE)
    y = wp.zeros(4, dtype=float, requires_grad=True, device=DEVICE)
    with wp.Tape() as tape2:
        wp.launch(scale, 4, inputs=[x_b, 3.0], outputs=[y], device=DEVICE)
    tape2.backward(grads={y: wp.ones_like(y)})
    seed = y.grad.numpy().copy()
    x_grad = x_b.grad.numpy().copy()

    grads = np.concatenate([w_grad, a_grad, seed, x_grad])
    expected = np.concatenate([[2.0, 4.0], np.ones(3), np.zeros(4), np.full(4, 3.0)])
    return {"grad": grads, "expected": expected}


if __name__ == "__main__":
    run()
