"""WT303 behind a helper: checkpointed rollout of State objects; the seed helper forgets ``qd``.

``Checkpointer`` stores a ``State`` (``q`` and ``qd``) at every segment boundary during
an untaped forward. Its backward replays the segments last to first;
``backprop_segment`` copies the later segment's start-state adjoint into the replayed
end state and runs the segment's backward, but copies only ``q.grad``. The velocity
adjoint never crosses a boundary, so the gradient of ``damping`` is wrong.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
DT = 0.05


@wp.kernel
def damped_step(
    q: wp.array(dtype=float),
    qd: wp.array(dtype=float),
    damping: wp.array(dtype=float),
    q_out: wp.array(dtype=float),
    qd_out: wp.array(dtype=float),
):
    i = wp.tid()
    v = qd[i] + DT * (-10.0 * q[i] - damping[i] * qd[i])
    qd_out[i] = v
    q_out[i] = q[i] + DT * v


@wp.kernel
def energy(q: wp.array(dtype=float), qd: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, 5.0 * q[i] * q[i] + 0.5 * qd[i] * qd[i])


class State:
    def __init__(self, n, q_np=None, qd_np=None):
        q_np = np.zeros(n) if q_np is None else q_np
        qd_np = np.zeros(n) if qd_np is None else qd_np
        self.q = wp.array(q_np, dtype=float, requires_grad=True, device=DEVICE)
        self.qd = wp.array(qd_np, dtype=float, requires_grad=True, device=DEVICE)


def backprop_segment(tape, end_state, later_start):
    wp.copy(end_state.q.grad, later_start.q.grad)
    tape.backward()  # expect: WT303


class Checkpointer:
    def __init__(self, damping, segments, steps):
        self.damping = damping
        self.segments = segments
        self.steps = steps
        self.checkpoints = []

    def segment(self, state):
        n = state.q.shape[0]
        for _ in range(self.steps):
            nxt = State(n)
            wp.launch(
                damped_step,
                dim=n,
                inputs=[state.q, state.qd, self.damping],
                outputs=[nxt.q, nxt.qd],
                device=DEVICE,
            )
            state = nxt
        return state

    def forward(self, initial):
        self.checkpoints = [initial]
        for s in range(self.segments):
            self.checkpoints.append(self.segment(self.checkpoints[s]))

    def backward(self, loss):
        for s in reversed(range(self.segments)):
            tape = wp.Tape()
            with tape:
                end = self.segment(self.checkpoints[s])
                if s == self.segments - 1:
                    wp.launch(
                        energy, dim=end.q.shape[0], inputs=[end.q, end.qd], outputs=[loss], device=DEVICE
                    )
            if s == self.segments - 1:
                tape.backward(loss)
            else:
                backprop_segment(tape, end, self.checkpoints[s + 1])


def objective_np(damping, q0, qd0, total_steps):
    q, qd = q0.copy(), qd0.copy()
    for _ in range(total_steps):
        qd = qd + DT * (-10.0 * q - damping * qd)
        q = q + DT * qd
    return float(np.sum(5.0 * q * q + 0.5 * qd * qd))


def central_differences(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2.0 * eps)
    return g


def run() -> dict:
    n, segments, steps = 2, 3, 4
    q0 = np.array([1.0, -0.5])
    qd0 = np.array([0.0, 1.0])
    c_np = np.array([0.5, 2.0])
    damping = wp.array(c_np, dtype=float, requires_grad=True, device=DEVICE)
    ckpt = Checkpointer(damping, segments, steps)
    ckpt.forward(State(n, q0, qd0))
    ckpt.backward(wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE))

    expected = central_differences(lambda c: objective_np(c, q0, qd0, segments * steps), c_np)
    return {"grad": damping.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
