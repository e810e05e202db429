"""WT301 in a package: the MLP (wt301_model_net) allocates its hidden activations without grad."""

import numpy as np
import warp as wp
import wt301_model_net as net

wp.config.quiet = True


def central_differences(f, params, eps=1e-6):
    grads = []
    for k, p in enumerate(params):
        g = np.zeros_like(p)
        for i in range(p.size):
            up = [q.copy() for q in params]
            down = [q.copy() for q in params]
            up[k][i] += eps
            down[k][i] -= eps
            g[i] = (f(up) - f(down)) / (2.0 * eps)
        grads.append(g)
    return grads


def run() -> dict:
    n = 6
    x_np = np.linspace(-1.0, 1.0, n)
    y_np = x_np**2
    weights_np = [np.array([1.5, 0.2]), np.array([-0.8, 0.4]), np.array([1.1, 0.3])]
    mlp = net.Mlp(n, weights_np)
    x = wp.array(x_np, dtype=float, device=net.DEVICE)
    y = wp.array(y_np, dtype=float, device=net.DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=net.DEVICE)

    tape = wp.Tape()
    with tape:
        mlp.forward(x, y, loss)
    tape.backward(loss)

    grad = np.concatenate([w.grad.numpy() for w in mlp.weights])
    expected = np.concatenate(central_differences(lambda ws: net.forward_np(ws, x_np, y_np), weights_np))
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
