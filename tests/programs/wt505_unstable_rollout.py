"""WT505 without an optimizer: a rollout that blows up because its time step is unstable.

Four stiff springs are stepped with symplectic Euler for 200 steps on one tape, and the
gradient of the final energy with respect to the initial velocities is taken. The code is
right, but the time step 0.05 is unstable for the stiffest spring (omega dt = 2.2 > 2): its
oscillation grows by a factor of about 2.2 per step until the positions overflow float32 in
the middle of the rollout, and the gradient that comes back is NaN. The launch that overflows
is innocent (it read values around 1e19 that the same line had been growing for a hundred
steps): no WT501, one divergence warning at that line.
"""
# check-numerics
# grad: wrong

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
N = 4
STEPS = 200
DT = 0.05
STIFFNESS = np.array([1.0, 10.0, 100.0, 1936.0], dtype=np.float32)  # omega = 1, 3.2, 10, 44


@wp.kernel
def step(
    q: wp.array(dtype=float),
    v: wp.array(dtype=float),
    k: wp.array(dtype=float),
    q_next: wp.array(dtype=float),
    v_next: wp.array(dtype=float),
):
    i = wp.tid()
    v_new = v[i] - DT * k[i] * q[i]
    v_next[i] = v_new
    q_next[i] = q[i] + DT * v_new


@wp.kernel
def energy(
    q: wp.array(dtype=float), v: wp.array(dtype=float), k: wp.array(dtype=float), e: wp.array(dtype=float)
):
    i = wp.tid()
    wp.atomic_add(e, 0, 0.5 * v[i] * v[i] + 0.5 * k[i] * q[i] * q[i])


def run() -> dict:
    k = wp.array(STIFFNESS, dtype=float, device=DEVICE)
    q = [wp.array(np.full(N, 0.1, dtype=np.float32), dtype=float, requires_grad=True, device=DEVICE)]
    v = [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)]
    for _ in range(STEPS):
        q.append(wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE))
        v.append(wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE))
    e = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        for t in range(STEPS):
            outs = [q[t + 1], v[t + 1]]
            wp.launch(step, dim=N, inputs=[q[t], v[t], k], outputs=outs, device=DEVICE)  # expect: WT505
        wp.launch(energy, dim=N, inputs=[q[-1], v[-1], k], outputs=[e], device=DEVICE)
    tape.backward(e)
    return {"grad": v[0].grad.numpy().copy(), "expected": true_grad()}


def true_grad() -> np.ndarray:
    """dE/dv0 of the same linear recurrence in float64 (finite, if huge: |lambda|**200)."""
    grad = np.zeros(N)
    for i, k in enumerate(STIFFNESS.astype(np.float64)):
        step = np.array([[1.0 - DT * DT * k, DT], [-DT * k, 1.0]])  # (q, v) -> (q, v) next
        total = np.linalg.matrix_power(step, STEPS)
        q, v = total @ np.array([0.1, 0.0])
        grad[i] = (total.T @ np.array([k * q, v]))[1]
    return grad


if __name__ == "__main__":
    run()
