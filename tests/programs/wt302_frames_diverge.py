"""WT302 behind a divergence: a gradient truncated at every frame points uphill.

A constant force per particle is trained so that the particles' velocity matches a target at
the end of each of two frames (three sub-steps of a stiff spring each). Each frame records
its own tape and backpropagates at once, summing the frame gradients into ``force.grad``; the
state carried into the second frame is a constant for its tape, so the path by which the
force acts on the second frame through that state is dropped. Here that path outweighs and
opposes the direct one: the truncated gradient has the wrong sign along the force, and
descending it climbs. The loss grows by about 1.8x per update until it overflows float32;
with the whole horizon on one tape (the fixed twin) the same step size converges.
"""
# check-numerics

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
N = 3
DT = 0.2
STIFFNESS = 20.0
SUBSTEPS = 3
FRAMES = 2
ITERATIONS = 160
LR = 25.0
TARGETS = np.array([[0.5, -0.2, 0.3], [0.1, 0.4, -0.3]], dtype=np.float32)


@wp.kernel
def step(
    q: wp.array(dtype=float),
    qd: wp.array(dtype=float),
    force: wp.array(dtype=float),
    q_out: wp.array(dtype=float),
    qd_out: wp.array(dtype=float),
):
    i = wp.tid()
    v = qd[i] + DT * (force[i] - STIFFNESS * q[i])
    qd_out[i] = v
    q_out[i] = q[i] + DT * v


@wp.kernel
def track(qd: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = qd[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(p: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * grad[i]


def true_grad(force: np.ndarray) -> np.ndarray:
    """The gradient of the summed frame losses, forward-mode over the whole horizon (float64)."""
    q, qd = np.zeros(N), np.zeros(N)
    dq, dqd = np.zeros(N), np.zeros(N)  # d(state)/d(force), per particle
    grad = np.zeros(N)
    for frame in range(FRAMES):
        for _ in range(SUBSTEPS):
            qd = qd + DT * (force - STIFFNESS * q)
            dqd = dqd + DT * (1.0 - STIFFNESS * dq)
            q = q + DT * qd
            dq = dq + DT * dqd
        grad += 2.0 * (qd - TARGETS[frame]) * dqd
    return grad


def run() -> dict:
    force = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    targets = [wp.array(t, dtype=float, device=DEVICE) for t in TARGETS]
    first = None
    for _ in range(ITERATIONS):
        q = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
        qd = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        for frame in range(FRAMES):
            tape = wp.Tape()
            with tape:
                for _ in range(SUBSTEPS):
                    q_next = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
                    qd_next = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
                    wp.launch(step, dim=N, inputs=[q, qd, force], outputs=[q_next, qd_next], device=DEVICE)
                    q, qd = q_next, qd_next
                wp.launch(track, dim=N, inputs=[qd, targets[frame]], outputs=[loss], device=DEVICE)
            tape.backward(loss)  # expect: WT302
        if first is None:
            first = (force.grad.numpy().copy(), true_grad(force.numpy().astype(np.float64)))
        wp.launch(sgd, dim=N, inputs=[force, force.grad, LR], device=DEVICE)  # expect: WT505
        force.grad.zero_()
    return {"grad": first[0], "expected": first[1]}


if __name__ == "__main__":
    run()
