"""Fixed twin of wt304_host_mean_after: the seed is the mean's 1/N.

``self.e.grad.fill_(1.0 / n)`` backpropagates the mean the fit prints.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def errors(
    c: wp.array(dtype=float),
    t: wp.array(dtype=float),
    target: wp.array(dtype=float),
    e: wp.array(dtype=float),
):
    i = wp.tid()
    d = c[0] * wp.exp(-t[i]) - target[i]
    e[i] = d * d


class Fit:
    def __init__(self, t_np, target_np):
        self.t_np, self.target_np = t_np, target_np
        self.t = wp.array(t_np, dtype=float, device=DEVICE)
        self.target = wp.array(target_np, dtype=float, device=DEVICE)
        self.e = wp.zeros(len(t_np), dtype=float, requires_grad=True, device=DEVICE)
        self.log = []

    def step(self, c_value: float) -> float:
        c = wp.array([c_value], dtype=float, requires_grad=True, device=DEVICE)
        tape = wp.Tape()
        with tape:
            wp.launch(
                errors, dim=len(self.t_np), inputs=[c, self.t, self.target], outputs=[self.e], device=DEVICE
            )
        self.e.grad.fill_(1.0 / len(self.t_np))
        tape.backward()
        self.log.append(float(np.mean(self.e.numpy())))
        return float(c.grad.numpy()[0])


def run() -> dict:
    t_np = np.linspace(0.0, 2.0, 5)
    target_np = 2.0 * np.exp(-t_np)
    fit = Fit(t_np, target_np)
    c_value = 1.0
    for _ in range(2):
        c_now = c_value
        grad = fit.step(c_now)
        c_value = c_now - 0.2 * grad
    d = c_now * np.exp(-t_np) - target_np
    expected = np.array([np.mean(2.0 * d * np.exp(-t_np))])
    return {"grad": np.array([grad]), "expected": expected}


if __name__ == "__main__":
    run()
