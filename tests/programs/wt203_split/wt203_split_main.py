"""WT203 split over modules: kernels, state, trainer (hides the backward) and this entry.

The training loop calls ``Trainer.step`` a few times; the gradient it used in the last
step is compared with the true gradient at the parameters of that step.
"""

import numpy as np
import warp as wp
import wt203_split_state as state
import wt203_split_trainer as trainer

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
    n, iters = 6, 3
    x_np = np.linspace(-1.5, 1.5, n)
    y_np = np.sin(x_np)
    model = state.Model(n)
    t = trainer.Trainer(
        model,
        wp.array(x_np, dtype=float, device=state.DEVICE),
        wp.array(y_np, dtype=float, device=state.DEVICE),
    )
    objective = lambda params: float(np.mean((state.forward_np(params, x_np) - y_np) ** 2))
    for _ in range(iters):
        expected = central_differences(objective, model.numpy_params())
        used = t.step()
    return {"grad": np.concatenate(used), "expected": np.concatenate(expected)}


if __name__ == "__main__":
    run()
