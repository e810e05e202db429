"""WT403 fixed: the discount weight is computed from the step index (`wp.pow(gamma, t)`)
instead of carried across iterations; the dynamic loop only accumulates."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


class Discount:
    def build(self, horizon: int):
        @wp.kernel
        def discounted(rewards: wp.array[float], gamma: wp.array[float], out: wp.array[float]):
            total = float(0.0)
            for t in range(horizon):
                total += wp.pow(gamma[0], float(t)) * rewards[t]
            out[0] = total

        return discounted


def run() -> dict:
    horizon = 24
    r_np = np.linspace(1.0, 2.0, horizon)
    g = 0.9
    rewards = wp.array(r_np, dtype=float, requires_grad=True, device=DEVICE)
    gamma = wp.array([g], dtype=float, requires_grad=True, device=DEVICE)
    out = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    kernel = Discount().build(horizon)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, 1, [rewards, gamma, out], device=DEVICE)
    tape.backward(loss=out)
    t = np.arange(horizon)
    expected = np.array([np.sum(t * g ** np.maximum(t - 1, 0) * r_np)])
    return {"grad": gamma.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
