"""WT306 fixed twin of wt306_optim: the optimizer steps before the gradients are zeroed."""

import numpy as np
import warp as wp
import wt306_optim_fixed_kernels as kernels
import wt306_optim_fixed_sgd as sgd

wp.config.quiet = True
DEVICE = "cpu"


def objective_np(amps, x, y, centers):
    pred = sum(amps[k] * np.exp(-((x - centers[k]) ** 2)) for k in range(3))
    return float(np.sum((pred - y) ** 2))


def central_differences(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2.0 * eps)
    return g


def run() -> dict:
    n, iters = 6, 3
    x_np = np.linspace(-2.0, 2.0, n)
    y_np = np.cos(x_np)
    c_np = np.array([-1.0, 0.0, 1.0])
    x = wp.array(x_np, dtype=float, device=DEVICE)
    y = wp.array(y_np, dtype=float, device=DEVICE)
    centers = wp.array(c_np, dtype=float, device=DEVICE)
    amps = wp.array([0.2, 0.5, 0.2], dtype=float, requires_grad=True, device=DEVICE)
    pred = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)
    opt = sgd.Sgd([amps], lr=0.05)

    for _ in range(iters):
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        tape = wp.Tape()
        with tape:
            wp.launch(kernels.rbf_predict, dim=n, inputs=[x, centers, amps], outputs=[pred], device=DEVICE)
            wp.launch(kernels.sq_error, dim=n, inputs=[pred, y], outputs=[loss], device=DEVICE)
        tape.backward(loss)
        expected = central_differences(
            lambda a: objective_np(a, x_np, y_np, c_np), amps.numpy().astype(np.float64)
        )
        opt.step()
        tape.zero()

    return {"grad": opt.last_grads[0], "expected": expected}


if __name__ == "__main__":
    run()
