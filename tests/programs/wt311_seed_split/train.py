"""WT311 without torch: a Warp seed buffer installed as ``out.grad`` by a class method each call.

``Model.gradient`` (in the model module) installs the objective weights, one Warp array made
in the constructor, as the output's gradient: ``out.grad = self.seed``. The adjoint of the
store ``out[i] = ...`` zeroes ``out.grad``, that is ``self.seed``: from the second call on the
weights are zeros and the gradient is zero.
"""

import numpy as np
import warp as wp
from wt311_seed_split_model import Model

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
