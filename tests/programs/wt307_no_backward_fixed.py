"""WT307 fixed twin: ``smooth`` is compiled with its backward."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def excite(x: wp.array(dtype=float), w: wp.array(dtype=float), a: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = w[i] * x[i]


@wp.kernel
def smooth(a: wp.array(dtype=float), s: wp.array(dtype=float)):
    i = wp.tid()
    s[i] = wp.log(1.0 + wp.exp(a[i]))


@wp.kernel
def objective(s: wp.array(dtype=float), bias: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = s[i] + bias[i] - 1.0
    wp.atomic_add(loss, 0, d * d)


def run() -> dict:
    n = 4
    x_np = np.array([1.0, -0.5, 2.0, 0.3])
    w_np = np.array([0.4, 1.2, -0.3, 2.0])
    b_np = np.array([0.1, 0.0, -0.2, 0.3])
    x = wp.array(x_np, dtype=float, device=DEVICE)
    w = wp.array(w_np, dtype=float, requires_grad=True, device=DEVICE)
    bias = wp.array(b_np, dtype=float, requires_grad=True, device=DEVICE)
    a = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)
    s = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(excite, dim=n, inputs=[x, w], outputs=[a], device=DEVICE)
        wp.launch(smooth, dim=n, inputs=[a], outputs=[s], device=DEVICE)
        wp.launch(objective, dim=n, inputs=[s, bias], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    z = w_np * x_np
    sp = np.log1p(np.exp(z))
    expected = 2.0 * (sp + b_np - 1.0) / (1.0 + np.exp(-z)) * x_np
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
