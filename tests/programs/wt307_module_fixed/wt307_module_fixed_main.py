"""WT307 fixed twin of wt307_module: the clip kernel's module keeps its backward."""

import numpy as np
import warp as wp
import wt307_module_fixed_physics as physics

wp.config.quiet = True
LIMIT = 2.0


def objective_np(control_flat, mass, start, goal):
    control = control_flat.reshape(-1, 2)
    vel = control / mass[:, None]
    clipped = vel * (LIMIT / np.sqrt(LIMIT * LIMIT + np.sum(vel * vel, axis=1, keepdims=True)))
    return float(np.sum((start + clipped - goal) ** 2))


def central_differences(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2.0 * eps)
    return g


def run() -> dict:
    c_np = np.array([[1.0, 0.5], [-2.0, 1.0], [0.3, -0.7]])
    m_np = np.array([1.0, 2.0, 0.5])
    s_np = np.zeros((3, 2))
    g_np = np.array([[1.0, 1.0], [-1.0, 0.0], [0.5, 0.5]])
    n = len(c_np)
    control = wp.array(c_np, dtype=wp.vec2, requires_grad=True, device=physics.DEVICE)
    mass = wp.array(m_np, dtype=float, device=physics.DEVICE)
    start = wp.array(s_np, dtype=wp.vec2, device=physics.DEVICE)
    goal = wp.array(g_np, dtype=wp.vec2, device=physics.DEVICE)
    vel = wp.zeros(n, dtype=wp.vec2, requires_grad=True, device=physics.DEVICE)
    clipped = wp.zeros(n, dtype=wp.vec2, requires_grad=True, device=physics.DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=physics.DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(physics.thrust, dim=n, inputs=[control, mass], outputs=[vel], device=physics.DEVICE)
        physics.clip_velocity(vel, LIMIT, clipped)
        wp.launch(physics.travel, dim=n, inputs=[clipped, start, goal], outputs=[loss], device=physics.DEVICE)
    tape.backward(loss)

    expected = central_differences(lambda c: objective_np(c, m_np, s_np, g_np), c_np.ravel()).reshape(-1, 2)
    return {"grad": control.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
