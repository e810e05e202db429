"""Fixed twin of wt304_mean_func: training backpropagates the same mean the report computes.

The training tape runs the ``average`` kernel too, on the costs, and ``tape.backward(loss)``
differentiates that mean: the objective trained is the objective reported.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
N = 6


@wp.func
def share_of_mean(cost: float):
    return cost / float(N)


@wp.kernel
def cost_kernel(a: wp.array(dtype=float), x: wp.array(dtype=float), costs: wp.array(dtype=float)):
    i = wp.tid()
    r = a[0] * wp.sin(x[i]) - 0.5
    costs[i] = r * r


@wp.kernel
def average(costs: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(out, 0, share_of_mean(costs[i]))


def forward(a, x, tape=None):
    costs = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    if tape is None:
        wp.launch(cost_kernel, dim=N, inputs=[a, x], outputs=[costs], device=DEVICE)
    else:
        with tape:
            wp.launch(cost_kernel, dim=N, inputs=[a, x], outputs=[costs], device=DEVICE)
    return costs


def report(a, x) -> float:
    out = wp.zeros(1, dtype=float, device=DEVICE)
    wp.launch(average, dim=N, inputs=[forward(a, x)], outputs=[out], device=DEVICE)
    return float(out.numpy()[0])


def run() -> dict:
    x_np = np.linspace(0.1, 2.0, N)
    x = wp.array(x_np, dtype=float, device=DEVICE)
    a_value = 1.5
    for _ in range(2):
        a = wp.array([a_value], dtype=float, requires_grad=True, device=DEVICE)
        tape = wp.Tape()
        costs = forward(a, x, tape)
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        with tape:
            wp.launch(average, dim=N, inputs=[costs], outputs=[loss], device=DEVICE)
        tape.backward(loss)
        grad = a.grad.numpy().astype(np.float64).copy()
        a_now = a_value
        a_value -= 0.1 * float(grad[0])
        report(wp.array([a_value], dtype=float, device=DEVICE), x)
    r = a_now * np.sin(x_np) - 0.5
    expected = np.array([np.mean(2.0 * r * np.sin(x_np))])
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
