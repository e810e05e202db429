"""Look-alike (fine): per-window backward, gradients summed on the host, no carried state.

Every window starts from the same initial state, made fresh from host data (and logged
with ``numpy()`` before it runs); the windows are independent samples, so summing their
gradients on the host before one update is the gradient of the summed objective. No
state a window produced from the parameter reaches another window.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
DT = 0.1
STEPS = 3


@wp.kernel
def step(q: wp.array(dtype=float), k: wp.array(dtype=float), q_out: wp.array(dtype=float)):
    i = wp.tid()
    q_out[i] = q[i] + DT * wp.tanh(-k[i] * q[i])


@wp.kernel
def track(q: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = q[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


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
    targets_np = [np.array([0.5, -0.2, 0.1]) * (w + 1) for w in range(3)]
    k = wp.array(k0, dtype=float, requires_grad=True, device=DEVICE)

    total = np.zeros_like(k0)
    log = []
    for target_np in targets_np:
        states = [wp.array(q_start, dtype=float, requires_grad=True, device=DEVICE)]
        states += [wp.zeros(3, dtype=float, requires_grad=True, device=DEVICE) for _ in range(STEPS)]
        log.append(states[0].numpy().copy())
        target = wp.array(target_np, dtype=float, device=DEVICE)
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        tape = wp.Tape()
        with tape:
            for t in range(STEPS):
                wp.launch(step, dim=3, inputs=[states[t], k], outputs=[states[t + 1]], device=DEVICE)
            wp.launch(track, dim=3, inputs=[states[-1], target], outputs=[loss], device=DEVICE)
        tape.backward(loss)
        total += k.grad.numpy()
        log.append(states[-1].numpy().copy())
        tape.zero()

    grad = total.copy()
    k.assign(k.numpy() - 0.01 * total)

    def objective(kk):
        return sum(float(np.sum((rollout_np(kk, q_start) - t) ** 2)) for t in targets_np)

    return {"grad": grad, "expected": central_differences(objective, k0)}


if __name__ == "__main__":
    run()
