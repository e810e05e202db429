"""Look-alike (fine): a kernel writes ``y[i]`` and then reads back the value it just wrote.

Write-then-read inside one kernel replays identically in the adjoint: the value read
back is the value the replay stores again, and no earlier launch read ``y``.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 3


@wp.kernel
def layer(
    x: wp.array(dtype=float),
    w: wp.array(dtype=float),
    y: wp.array(dtype=float),
    z: wp.array(dtype=wp.vec2),
):
    i = wp.tid()
    y[i] = wp.tanh(w[i] * x[i])
    h = y[i]
    z[i] = wp.vec2(h * h, h * h * h)


@wp.kernel
def objective(z: wp.array(dtype=wp.vec2), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, z[i][0] + 2.0 * z[i][1])


def reference_loss(w, x):
    h = np.tanh(w * x)
    return np.sum(h * h + 2.0 * h**3)


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
    y = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    z = wp.zeros(N, dtype=wp.vec2, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(layer, dim=N, inputs=[x, w], outputs=[y, z], device=DEVICE)
        wp.launch(objective, dim=N, inputs=[z], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = central_differences(lambda ww: reference_loss(ww, x0), w0)
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
