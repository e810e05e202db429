"""Look-alike of WT201: the very same launches repeated, on state updated in place by ``+=``.

Each step launches ``kick`` and ``drift`` with identical arguments, so the tape holds
several records of the same kernel over the same memory. But the kernels accumulate
(``qd[i] += ...``, ``q[i] += ...``): the inputs of each launch were rewritten by the
previous step, each launch is a real step of the time loop, and an accumulating
store's adjoint neither consumes nor depends on the old value. The gradient is exact.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
DT = 0.05


@wp.kernel
def kick(thrust: wp.array(dtype=float), gain: wp.array(dtype=float), qd: wp.array(dtype=float)):
    i = wp.tid()
    qd[i] += DT * gain[i] * wp.tanh(thrust[i])


@wp.kernel
def drift(qd: wp.array(dtype=float), q: wp.array(dtype=float)):
    i = wp.tid()
    q[i] += DT * qd[i]


@wp.kernel
def distance(q: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = q[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


def simulate_np(thrust, gain, q0, qd0, steps):
    q, qd = q0.copy(), qd0.copy()
    for _ in range(steps):
        qd = qd + DT * gain * np.tanh(thrust)
        q = q + DT * qd
    return q


def run() -> dict:
    n, steps = 3, 5
    q0 = np.array([0.0, 0.2, -0.1])
    qd0 = np.array([0.5, -0.5, 0.0])
    th_np = np.array([0.3, -1.2, 0.8])
    g_np = np.array([2.0, 1.0, 3.0])
    t_np = np.array([0.5, 0.5, 0.5])
    thrust = wp.array(th_np, dtype=float, requires_grad=True, device=DEVICE)
    gain = wp.array(g_np, dtype=float, device=DEVICE)
    q = wp.array(q0, dtype=float, requires_grad=True, device=DEVICE)
    qd = wp.array(qd0, dtype=float, requires_grad=True, device=DEVICE)
    target = wp.array(t_np, dtype=float, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        for _ in range(steps):
            wp.launch(kick, dim=n, inputs=[thrust, gain], outputs=[qd], device=DEVICE)
            wp.launch(drift, dim=n, inputs=[qd], outputs=[q], device=DEVICE)
        wp.launch(distance, dim=n, inputs=[q, target], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    # q_T = q0 + DT * sum_k qd_k, qd_k = qd0 + k * DT * g * tanh(th): dq_T/dth = DT^2 * g * sech^2 * sum(k)
    q_t = simulate_np(th_np, g_np, q0, qd0, steps)
    ksum = steps * (steps + 1) / 2
    expected = 2.0 * (q_t - t_np) * DT * DT * ksum * g_np * (1.0 - np.tanh(th_np) ** 2)
    return {"grad": thrust.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
