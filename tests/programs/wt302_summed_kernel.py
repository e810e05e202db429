"""WT302 with the gradient summed outside ``.grad``: a kernel accumulates each window's.

A class holds the rollout; each window is recorded on its own tape from the state the
previous window ended in (carried by rebinding ``states[0] = states[-1]``), is
backpropagated at once, and a kernel adds ``force.grad`` into a separate accumulator
before ``tape.zero()`` clears it. The accumulator is the sum of per-window gradients,
each of which treats its incoming state as a constant: every path by which ``force``
acts on later windows through the carried state is dropped.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
DT = 0.1
STEPS = 2
WINDOWS = 3


@wp.kernel
def step(
    q: wp.array(dtype=float),
    qd: wp.array(dtype=float),
    force: wp.array(dtype=float),
    q_out: wp.array(dtype=float),
    qd_out: wp.array(dtype=float),
):
    i = wp.tid()
    v = qd[i] + DT * (force[i] - 4.0 * q[i] - 0.5 * qd[i])
    qd_out[i] = v
    q_out[i] = q[i] + DT * v


@wp.kernel
def track(q: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = q[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def accumulate(total: wp.array(dtype=float), grad: wp.array(dtype=float)):
    i = wp.tid()
    total[i] += grad[i]


def objective_np(force, q0, qd0, targets):
    q, qd, total = q0.copy(), qd0.copy(), 0.0
    for target in targets:
        for _ in range(STEPS):
            qd = qd + DT * (force - 4.0 * q - 0.5 * qd)
            q = q + DT * qd
        total += float(np.sum((q - target) ** 2))
    return total


def central_differences(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2.0 * eps)
    return g


class Rollout:
    def __init__(self, q0, qd0, force):
        self.n = len(q0)
        self.force = force
        self.states = [
            (
                wp.array(q0, dtype=float, requires_grad=True, device=DEVICE),
                wp.array(qd0, dtype=float, requires_grad=True, device=DEVICE),
            )
        ]
        self.grad_total = wp.zeros(self.n, dtype=float, device=DEVICE)

    def fresh(self):
        return (
            wp.zeros(self.n, dtype=float, requires_grad=True, device=DEVICE),
            wp.zeros(self.n, dtype=float, requires_grad=True, device=DEVICE),
        )

    def window(self, target):
        self.states += [self.fresh() for _ in range(STEPS)]
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        tape = wp.Tape()
        with tape:
            for t in range(STEPS):
                (q, qd), (q_out, qd_out) = self.states[t], self.states[t + 1]
                wp.launch(
                    step, dim=self.n, inputs=[q, qd, self.force], outputs=[q_out, qd_out], device=DEVICE
                )
            wp.launch(track, dim=self.n, inputs=[self.states[-1][0], target], outputs=[loss], device=DEVICE)
        tape.backward(loss)  # expect: WT302
        wp.launch(accumulate, dim=self.n, inputs=[self.grad_total, self.force.grad], device=DEVICE)
        tape.zero()
        self.states = [self.states[-1]]


def run() -> dict:
    q0 = np.array([0.0, 0.5, -0.3])
    qd0 = np.array([0.2, 0.0, 0.1])
    f_np = np.array([1.0, -0.5, 2.0])
    targets_np = [np.array([0.1, 0.3, 0.0]) * (k + 1) for k in range(WINDOWS)]
    force = wp.array(f_np, dtype=float, requires_grad=True, device=DEVICE)
    targets = [wp.array(t, dtype=float, device=DEVICE) for t in targets_np]

    rollout = Rollout(q0, qd0, force)
    for target in targets:
        rollout.window(target)

    expected = central_differences(lambda f: objective_np(f, q0, qd0, targets_np), f_np)
    return {"grad": rollout.grad_total.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
