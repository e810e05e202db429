"""Look-alike (fine): a training loop that rebuilds its parameter from ``numpy()`` each iteration.

Three iterations, each a fresh tape over a 40-launch rollout, ``tape.backward(loss)``,
``g = p.grad.numpy()``, then ``p = wp.array(p.numpy() - 0.1 * g, requires_grad=True)``.
Every iteration's ``p`` is a new array (allocated at the same line) whose gradient starts
at zero, so each read holds one backward: nothing accumulates. gradcheck used to treat the
iterations' arrays as one parameter and the two reads as one accumulated gradient, and said
"disagree" (28%) on this correct program.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 4
STEPS = 39
ITERS = 3
LR = 0.1


@wp.kernel
def step(x: wp.array(dtype=float), p: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] + 0.05 * wp.sin(p[i] * x[i])


@wp.kernel
def sum_squares(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


def reference_grad(p, x0, eps=1e-6):
    def loss(pp):
        x = x0.copy()
        for _ in range(STEPS):
            x = x + 0.05 * np.sin(pp * x)
        return np.sum(x * x)

    grad = np.zeros_like(p)
    for j in range(p.size):
        d = np.zeros_like(p)
        d[j] = eps
        grad[j] = (loss(p + d) - loss(p - d)) / (2.0 * eps)
    return grad


def run() -> dict:
    x0 = np.linspace(0.2, 1.0, N)
    p = wp.array(np.full(N, 0.7), dtype=float, requires_grad=True, device=DEVICE)
    grads, expected = [], []
    for _ in range(ITERS):
        tape = wp.Tape()
        xs = [wp.array(x0, dtype=float, requires_grad=True, device=DEVICE)]
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        with tape:
            for _ in range(STEPS):
                y = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
                wp.launch(step, dim=N, inputs=[xs[-1], p], outputs=[y], device=DEVICE)
                xs.append(y)
            wp.launch(sum_squares, dim=N, inputs=[xs[-1]], outputs=[loss], device=DEVICE)
        tape.backward(loss)
        g = p.grad.numpy()
        grads.append(g.astype(np.float64).copy())
        expected.append(reference_grad(p.numpy().astype(np.float64), x0))
        p = wp.array(p.numpy() - LR * g, dtype=float, requires_grad=True, device=DEVICE)
    return {"grad": np.concatenate(grads), "expected": np.concatenate(expected)}


if __name__ == "__main__":
    run()
