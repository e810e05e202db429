"""WT303 fixed twin: each earlier segment is seeded with the adjoints of both ``q`` and ``qd``."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
DT = 0.1
SEGMENTS = 3
STEPS = 3


@wp.kernel
def step(
    q: wp.array(dtype=float),
    qd: wp.array(dtype=float),
    force: wp.array(dtype=float),
    q_out: wp.array(dtype=float),
    qd_out: wp.array(dtype=float),
):
    i = wp.tid()
    v = qd[i] + DT * (force[i] - 3.0 * wp.sin(q[i]))
    qd_out[i] = v
    q_out[i] = q[i] + DT * v


@wp.kernel
def final_cost(q: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = q[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


def simulate_segment(q, qd, force):
    n = q.shape[0]
    for _ in range(STEPS):
        q_next = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)
        qd_next = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)
        wp.launch(step, dim=n, inputs=[q, qd, force], outputs=[q_next, qd_next], device=DEVICE)
        q, qd = q_next, qd_next
    return q, qd


def objective_np(force, q0, qd0, target):
    q, qd = q0.copy(), qd0.copy()
    for _ in range(SEGMENTS * STEPS):
        qd = qd + DT * (force - 3.0 * np.sin(q))
        q = q + DT * qd
    return float(np.sum((q - target) ** 2))


def central_differences(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2.0 * eps)
    return g


def run() -> dict:
    n = 3
    q0 = np.array([0.1, -0.2, 0.4])
    qd0 = np.array([0.0, 0.3, -0.1])
    f_np = np.array([1.5, -0.5, 0.8])
    t_np = np.array([1.0, 0.0, 0.5])
    force = wp.array(f_np, dtype=float, requires_grad=True, device=DEVICE)
    target = wp.array(t_np, dtype=float, device=DEVICE)

    # forward: untaped, keep the boundary states (the checkpoints)
    ckpt_q = [wp.array(q0, dtype=float, requires_grad=True, device=DEVICE)]
    ckpt_qd = [wp.array(qd0, dtype=float, requires_grad=True, device=DEVICE)]
    for s in range(SEGMENTS):
        q_end, qd_end = simulate_segment(ckpt_q[s], ckpt_qd[s], force)
        ckpt_q.append(q_end)
        ckpt_qd.append(qd_end)

    # backward: replay each segment under its own tape, last to first
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    for s in reversed(range(SEGMENTS)):
        tape = wp.Tape()
        with tape:
            q_end, qd_end = simulate_segment(ckpt_q[s], ckpt_qd[s], force)
            if s == SEGMENTS - 1:
                wp.launch(final_cost, dim=n, inputs=[q_end, target], outputs=[loss], device=DEVICE)
        if s == SEGMENTS - 1:
            tape.backward(loss)
        else:
            q_end.grad.assign(ckpt_q[s + 1].grad)
            qd_end.grad.assign(ckpt_qd[s + 1].grad)
            tape.backward()

    expected = central_differences(lambda f: objective_np(f, q0, qd0, t_np), f_np)
    return {"grad": force.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
