"""Look-alike (fine): a forward-only pass with ``enable_backward=False``, then training with it on.

The program first evaluates the kernel with the module compiled without adjoints (a quick
forward-only pass), then sets ``enable_backward`` back to True with
``wp.set_module_options`` before it records the training step. Warp rebuilds the module
with adjoints, so the taped launch is differentiated and the gradient is right: the
option the launch ran under is the one that counts, not the one the kernel first had.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 3


@wp.kernel
def energy(x: wp.array(dtype=float), w: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    e = w[i] * x[i]
    wp.atomic_add(loss, 0, e * e)


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

    wp.set_module_options({"enable_backward": False})
    preview = wp.zeros(1, dtype=float, device=DEVICE)
    wp.launch(energy, dim=N, inputs=[x, w], outputs=[preview], device=DEVICE)

    wp.set_module_options({"enable_backward": True})
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(energy, dim=N, inputs=[x, w], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = central_differences(lambda ww: reference_loss(ww, x0), w0)
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
