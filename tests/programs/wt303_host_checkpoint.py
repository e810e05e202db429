"""WT303 through the host: checkpoints and adjoints cross every boundary as numpy arrays.

The forward runs untaped and saves a dict of host copies (``x.numpy().copy()``) of the
state at each segment boundary. The backward replays the segments last to first, each
under its own tape, from ``wp.array(checkpoint, requires_grad=True)``; the adjoint of a
segment's initial state is read back with ``.grad.numpy()`` and handed to the previous
segment with ``.grad.assign(...)``. Only ``q``'s adjoint is handed over, not ``qd``'s:
the gradient through ``qd`` is dropped at every boundary. Every link passes through
numpy, so only the content of the transfers connects the segments.
"""

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


class Segment:
    """STEPS steps from a restored state, with per-step buffers."""

    def __init__(self, checkpoint, force):
        self.q0 = wp.array(checkpoint["q"], dtype=float, requires_grad=True, device=DEVICE)
        self.qd0 = wp.array(checkpoint["qd"], dtype=float, requires_grad=True, device=DEVICE)
        self.force = force

    def run(self):
        q, qd = self.q0, self.qd0
        n = q.shape[0]
        for _ in range(STEPS):
            q_next = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)
            qd_next = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)
            wp.launch(step, dim=n, inputs=[q, qd, self.force], outputs=[q_next, qd_next], device=DEVICE)
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
    qd0 = np.array([0.05, 0.3, -0.1])
    f_np = np.array([1.5, -0.5, 0.8])
    t_np = np.array([1.0, 0.0, 0.5])
    force = wp.array(f_np, dtype=float, requires_grad=True, device=DEVICE)
    target = wp.array(t_np, dtype=float, device=DEVICE)

    # forward: untaped, in place, saving host checkpoints
    q = wp.array(q0, dtype=float, device=DEVICE)
    qd = wp.array(qd0, dtype=float, device=DEVICE)
    q_tmp = wp.zeros_like(q)
    qd_tmp = wp.zeros_like(qd)
    checkpoints = []
    for _ in range(SEGMENTS):
        checkpoints.append({"q": q.numpy().copy(), "qd": qd.numpy().copy()})
        for _ in range(STEPS):
            wp.launch(step, dim=n, inputs=[q, qd, force], outputs=[q_tmp, qd_tmp], device=DEVICE)
            wp.copy(q, q_tmp)
            wp.copy(qd, qd_tmp)

    # backward: replay each segment under its own tape, last to first
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    adjoint = None
    for s in reversed(range(SEGMENTS)):
        segment = Segment(checkpoints[s], force)
        tape = wp.Tape()
        with tape:
            q_end, qd_end = segment.run()
            if adjoint is None:
                wp.launch(final_cost, dim=n, inputs=[q_end, target], outputs=[loss], device=DEVICE)
        if adjoint is None:
            tape.backward(loss)
        else:
            q_end.grad.assign(adjoint["q"])
            tape.backward()  # expect: WT303
        adjoint = {"q": segment.q0.grad.numpy().copy(), "qd": segment.qd0.grad.numpy().copy()}

    expected = central_differences(lambda f: objective_np(f, q0, qd0, t_np), f_np)
    return {"grad": force.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
