"""Look-alike (fine): a ``@wp.func`` stores into an array and then reads back what it stored.

``square_via_scratch`` writes ``scratch[i] = x`` and returns ``scratch[i] * scratch[i]``.
The kernel's only use of ``scratch`` is to hand it to the function, so it reads and
stores the same array in one launch, but the adjoint replays the call: the store comes
again before the reads, and they see the same value as in the forward pass.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 3


@wp.func
def square_via_scratch(scratch: wp.array(dtype=float), x: float, i: int):
    scratch[i] = x
    return scratch[i] * scratch[i]


@wp.kernel
def energy(
    x: wp.array(dtype=float),
    w: wp.array(dtype=float),
    scratch: wp.array(dtype=float),
    loss: wp.array(dtype=float),
):
    i = wp.tid()
    e = square_via_scratch(scratch, w[i] * x[i], i)
    wp.atomic_add(loss, 0, e)


def reference_loss(w, x):
    return np.sum((w * x) ** 2)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    x0 = np.array([0.5, -1.0, 2.0])
    w0 = np.array([1.2, 0.4, -0.6])

    x = wp.array(x0, dtype=float, device=DEVICE)
    w = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
    scratch = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(energy, dim=N, inputs=[x, w, scratch], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = central_differences(lambda ww: reference_loss(ww, x0), w0)
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
