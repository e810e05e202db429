"""WT304 fixed twin of wt304_grads_dict: the mean cost is reduced on the tape; backward through ``loss=``."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def particle_cost(pos: wp.array(dtype=wp.vec3), goal: wp.array(dtype=wp.vec3), cost: wp.array(dtype=float)):
    i = wp.tid()
    d = pos[i] - goal[i]
    cost[i] = wp.sqrt(wp.dot(d, d) + 1.0)


@wp.kernel
def mean(values: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, values[i] / float(values.shape[0]))


def backward_from(tape, loss):
    tape.backward(loss)


def run() -> dict:
    p_np = np.array([[0.0, 0.0, 0.0], [1.0, 0.5, -0.5], [-1.0, 2.0, 0.0], [0.3, 0.3, 0.3]])
    g_np = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [-0.5, 0.2, 0.9]])
    n = len(p_np)
    pos = wp.array(p_np, dtype=wp.vec3, requires_grad=True, device=DEVICE)
    goal = wp.array(g_np, dtype=wp.vec3, device=DEVICE)
    cost = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(particle_cost, dim=n, inputs=[pos, goal], outputs=[cost], device=DEVICE)
        wp.launch(mean, dim=n, inputs=[cost], outputs=[loss], device=DEVICE)
    objective = float(loss.numpy()[0])
    backward_from(tape, loss)

    d = p_np - g_np
    expected = d / np.sqrt(np.sum(d * d, axis=1, keepdims=True) + 1.0) / n
    return {"grad": pos.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
