"""WT305: the objective is finished by an untaped launch; backward is seeded on a taped partial sum.

The tape records the data term ``total = sum (x_i - anchor_i)^2`` into a 1-element
array. The objective that is reported and optimized, ``total / n + LAM * sum x_i^2``,
is then formed by an untaped ``finalize`` launch, and the backward is seeded on the
taped ``total`` instead. The gradient misses the 1/n scale and the regularizer.
The arrays live in a ``Problem`` object.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
LAM = 0.5


@wp.kernel
def data_term(x: wp.array(dtype=float), anchor: wp.array(dtype=float), total: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - anchor[i]
    wp.atomic_add(total, 0, d * d)


@wp.kernel
def finalize(total: wp.array(dtype=float), x: wp.array(dtype=float), objective: wp.array(dtype=float)):
    i = wp.tid()
    term = LAM * x[i] * x[i]
    if i == 0:
        term += total[0] / float(x.shape[0])
    wp.atomic_add(objective, 0, term)


class Problem:
    def __init__(self, x_np, anchor_np):
        self.n = len(x_np)
        self.x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
        self.anchor = wp.array(anchor_np, dtype=float, device=DEVICE)
        self.total = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        self.objective = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)


def run() -> dict:
    x_np = np.array([0.5, -1.0, 2.0, 0.25])
    a_np = np.array([1.0, 1.0, 1.0, 1.0])
    prob = Problem(x_np, a_np)

    tape = wp.Tape()
    with tape:
        wp.launch(data_term, dim=prob.n, inputs=[prob.x, prob.anchor], outputs=[prob.total], device=DEVICE)
    wp.launch(finalize, prob.n, [prob.total, prob.x], [prob.objective], device=DEVICE)  # expect: WT305
    tape.backward(prob.total)

    expected = 2.0 * (x_np - a_np) / len(x_np) + 2.0 * LAM * x_np
    return {"grad": prob.x.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
