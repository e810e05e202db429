"""WT304 via ``tape.backward(grads={terms: ones})`` hidden in a helper; the objective is the mean.

A small "autograd bridge" helper backpropagates a vector of per-particle costs with an
all-ones upstream gradient, the way one would for a summed objective. The training
code reports and minimizes the *mean* cost over the 4 particles, so the gradient
handed to the optimizer is 4x too large.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def particle_cost(pos: wp.array(dtype=wp.vec3), goal: wp.array(dtype=wp.vec3), cost: wp.array(dtype=float)):
    i = wp.tid()
    d = pos[i] - goal[i]
    cost[i] = wp.sqrt(wp.dot(d, d) + 1.0)


def backward_from(tape, outputs):
    """Backpropagate every array in ``outputs`` with an upstream gradient of ones."""
    tape.backward(grads={out: wp.ones_like(out) for out in outputs})  # expect: WT304


def run() -> dict:
    p_np = np.array([[0.0, 0.0, 0.0], [1.0, 0.5, -0.5], [-1.0, 2.0, 0.0], [0.3, 0.3, 0.3]])
    g_np = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [-0.5, 0.2, 0.9]])
    n = len(p_np)
    pos = wp.array(p_np, dtype=wp.vec3, requires_grad=True, device=DEVICE)
    goal = wp.array(g_np, dtype=wp.vec3, device=DEVICE)
    cost = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(particle_cost, dim=n, inputs=[pos, goal], outputs=[cost], device=DEVICE)
    objective = float(np.mean(cost.numpy()))
    backward_from(tape, [cost])

    d = p_np - g_np
    expected = d / np.sqrt(np.sum(d * d, axis=1, keepdims=True) + 1.0) / n
    return {"grad": pos.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
