"""WT201 fixed twin: the duplicate launch is gone; ``y`` still keeps its gradient.

``scale`` is recorded once; ``retain_grad=True`` on ``y`` is harmless for a single write.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def scale(x: wp.array(dtype=float), w: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.tanh(x[i] * w[i])


@wp.kernel
def squared_error(y: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


def run() -> dict:
    n = 6
    x_np = np.linspace(-1.0, 1.5, n)
    w_np = np.linspace(0.3, 1.2, n)
    t_np = np.linspace(0.5, -0.5, n)
    x = wp.array(x_np, dtype=float, device=DEVICE)
    w = wp.array(w_np, dtype=float, requires_grad=True, device=DEVICE)
    target = wp.array(t_np, dtype=float, device=DEVICE)
    y = wp.zeros(n, dtype=float, requires_grad=True, retain_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(scale, dim=n, inputs=[x, w], outputs=[y], device=DEVICE)
        wp.launch(squared_error, dim=n, inputs=[y, target], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    th = np.tanh(x_np * w_np)
    expected = 2.0 * (th - t_np) * (1.0 - th * th) * x_np
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
