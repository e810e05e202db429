"""WT403 in a kernel built by a method of a user class: the trip count is a closure value.

`Discount.build(horizon=24)` bakes the horizon into the kernel; Warp resolves it as a
constant but 24 exceeds max_unroll (16), so the loop is dynamic and the running discount
factor `weight = weight * gamma[0]` is replayed from its final value.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


class Discount:
    def build(self, horizon: int):
        @wp.kernel
        def discounted(rewards: wp.array[float], gamma: wp.array[float], out: wp.array[float]):
            total = float(0.0)
            weight = float(1.0)
            for t in range(horizon):
                total += weight * rewards[t]
                weight = weight * gamma[0]  # expect: WT403
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
