"""Fixed twin of wt311_seed_split: the model copies its weights into ``out.grad``.

``out.grad.assign(self.seed)`` fills the gradient Warp allocated for ``out``; the store adjoint
consumes that copy and ``self.seed`` keeps the weights.
"""

import numpy as np
import warp as wp
from wt311_seed_split_fixed_model import Model

wp.config.quiet = True


def run() -> dict:
    xs = np.array([0.5, 1.0, 1.5, 2.0])
    weights = np.array([1.0, 2.0, -1.0, 0.5])
    model = Model(xs, weights)
    k = 0.8
    for _ in range(3):
        k_now = k
        grad = model.gradient(k_now)
        k = k_now - 0.01 * grad
    expected = float(np.sum(weights * (xs * xs + np.cos(k_now))))
    return {"grad": np.array([grad]), "expected": np.array([expected])}


if __name__ == "__main__":
    run()
