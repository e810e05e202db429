"""WT302 split over modules: a controller struct, a State class and an Episode that
backpropagates window by window while carrying the state between tapes."""

import numpy as np
import warp as wp
import wt302_sim_episode as episode
import wt302_sim_kernels as kernels
import wt302_sim_state as sim_state

wp.config.quiet = True
GOALS = [0.2, 0.5, 0.8]
STEPS_PER_WINDOW = 3


def objective_np(params, q0, qd0):
    n = len(q0)
    gain, bias = params[:n], params[n:]
    q, qd, total = q0.copy(), qd0.copy(), 0.0
    for goal in GOALS:
        for _ in range(STEPS_PER_WINDOW):
            u = bias - gain * q
            qd = qd + kernels.DT * (u - np.sin(q))
            q = q + kernels.DT * qd
        total += float(np.sum((q - goal) ** 2))
    return total


def central_differences(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2.0 * eps)
    return g


def run() -> dict:
    q0 = np.array([0.0, 0.3])
    qd0 = np.array([0.5, -0.2])
    gain_np = np.array([1.0, 2.0])
    bias_np = np.array([0.5, 1.5])
    ctrl = kernels.Controller()
    ctrl.gain = wp.array(gain_np, dtype=float, requires_grad=True, device=sim_state.DEVICE)
    ctrl.bias = wp.array(bias_np, dtype=float, requires_grad=True, device=sim_state.DEVICE)
    ep = episode.Episode(ctrl, sim_state.State(q0, qd0), STEPS_PER_WINDOW)
    for goal in GOALS:
        ep.window(goal)

    grad = np.concatenate([ctrl.gain.grad.numpy(), ctrl.bias.grad.numpy()])
    expected = central_differences(lambda p: objective_np(p, q0, qd0), np.concatenate([gain_np, bias_np]))
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
