"""WT401 under a hand seed assigned as the output's gradient: ``y.grad = seed``.

Per-element weights of the outputs (say, from an outer solver) become ``y.grad``, then
``tape.backward()`` runs with no ``loss=``: the gradient read is that of Σ seed·y. The
loop rebuilds the weights ``w`` from ``numpy()`` each iteration. The bug: ``h[i] *= w[i]``
in place, whose adjoint reads the product instead of the old ``h``.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 4
ITERS = 2
LR = 0.05


@wp.kernel
def lift(x: wp.array(dtype=float), h: wp.array(dtype=float)):
    i = wp.tid()
    h[i] = x[i] * x[i] + 1.0


@wp.kernel
def weigh(h: wp.array(dtype=float), w: wp.array(dtype=float)):
    i = wp.tid()
    h[i] *= w[i]  # expect: WT401


def run() -> dict:
    x0 = np.array([0.5, -1.0, 1.5, 0.2])
    seed_np = np.array([0.3, 1.0, -0.7, 2.0])
    x = wp.array(x0, dtype=float, device=DEVICE)
    w = wp.array(np.array([1.2, 0.4, 0.9, -0.6]), dtype=float, requires_grad=True, device=DEVICE)
    grads, expected = [], []
    for _ in range(ITERS):
        h = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
        tape = wp.Tape()
        with tape:
            wp.launch(lift, dim=N, inputs=[x], outputs=[h], device=DEVICE)
            wp.launch(weigh, dim=N, inputs=[h, w], device=DEVICE)
        h.grad = wp.array(seed_np, dtype=float, device=DEVICE)
        tape.backward()
        g = w.grad.numpy().astype(np.float64)
        grads.append(g.copy())
        expected.append(seed_np * (x0 * x0 + 1.0))
        w = wp.array(w.numpy() - LR * g, dtype=float, requires_grad=True, device=DEVICE)
    return {"grad": np.concatenate(grads), "expected": np.concatenate(expected)}


if __name__ == "__main__":
    run()
