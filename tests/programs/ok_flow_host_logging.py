"""Look-alike (fine): numpy round trips for logging and display only.

One tape covers the whole horizon. Each step's state is logged with
``numpy().copy()``; after the backward the logged states are uploaded again
(``wp.array(history[k])``) and an untaped kernel measures them for a report. The
round trips carry values, but no taped computation depends on them.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
DT = 0.1
STEPS = 4


@wp.kernel
def step(q: wp.array(dtype=float), k: wp.array(dtype=float), q_out: wp.array(dtype=float)):
    i = wp.tid()
    q_out[i] = q[i] + DT * wp.tanh(-k[i] * q[i])


@wp.kernel
def energy(q: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(out, 0, q[i] * q[i])


def rollout_np(k, q):
    for _ in range(STEPS):
        q = q + DT * np.tanh(-k * q)
    return q


def central_differences(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2.0 * eps)
    return g


def run() -> dict:
    q_start = np.array([1.0, -0.7, 0.4])
    k0 = np.array([1.5, 2.0, 0.8])
    k = wp.array(k0, dtype=float, requires_grad=True, device=DEVICE)
    states = [wp.array(q_start, dtype=float, requires_grad=True, device=DEVICE)]
    states += [wp.zeros(3, dtype=float, requires_grad=True, device=DEVICE) for _ in range(STEPS)]
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    history = [states[0].numpy().copy()]

    tape = wp.Tape()
    with tape:
        for t in range(STEPS):
            wp.launch(step, dim=3, inputs=[states[t], k], outputs=[states[t + 1]], device=DEVICE)
            history.append(states[t + 1].numpy().copy())
        wp.launch(energy, dim=3, inputs=[states[-1]], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    grad = k.grad.numpy().copy()

    report = []
    for saved in history:
        shown = wp.array(saved, dtype=float, device=DEVICE)
        out = wp.zeros(1, dtype=float, device=DEVICE)
        wp.launch(energy, dim=3, inputs=[shown], outputs=[out], device=DEVICE)
        report.append(float(out.numpy()[0]))

    expected = central_differences(lambda kk: float(np.sum(rollout_np(kk, q_start) ** 2)), k0)
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
