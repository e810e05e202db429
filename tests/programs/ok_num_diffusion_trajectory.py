"""Look-alike of WT504: a fixed number of diffusion steps whose every state the loss uses.

``diffuse`` relaxes a 1D temperature profile (with losses to the surroundings) toward the
steady state of a fixed heat source, each step a launch reading the previous state and writing a fresh one with the
source unchanged: the successive changes shrink geometrically exactly like a truncated
Jacobi solve's, and the last one is still large. But the loss matches every state of the
trajectory against measurements, so the program is the eight steps themselves, not an
approximation of their fixed point: the gradient through the steps is the one the
objective asks for, and there is no WT504.
"""
# check-numerics
# grad-wrong-before: 1.17  (Warp's own gradient of `diffuse` is wrong on 1.13-1.16, measured against the float64 sum)

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
N = 8
STEPS = 8
ALPHA = 0.2
DECAY = 0.3


@wp.kernel
def diffuse(u: wp.array(dtype=float), source: wp.array(dtype=float), u_next: wp.array(dtype=float)):
    i = wp.tid()
    left = u[i - 1] if i > 0 else 0.0
    right = u[i + 1] if i < N - 1 else 0.0
    u_next[i] = u[i] + ALPHA * (left - 2.0 * u[i] + right) - DECAY * u[i] + source[i]


@wp.kernel
def misfit(u: wp.array(dtype=float), measured: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = u[i] - measured[i]
    wp.atomic_add(loss, 0, d * d)


def run() -> dict:
    source = wp.array(
        np.linspace(0.1, 0.3, N, dtype=np.float32), dtype=float, requires_grad=True, device=DEVICE
    )
    states = [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(STEPS + 1)]
    measured = [wp.full(N, 0.1 * k, dtype=float, device=DEVICE) for k in range(STEPS + 1)]
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        for k in range(STEPS):
            wp.launch(diffuse, dim=N, inputs=[states[k], source], outputs=[states[k + 1]], device=DEVICE)
        for k in range(1, STEPS + 1):
            wp.launch(misfit, dim=N, inputs=[states[k], measured[k]], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    # the same steps in float64: u_{k+1} = M u_k + s, so d u_k / d s = sum_{j<k} M^j
    step = (1.0 - 2.0 * ALPHA - DECAY) * np.eye(N) + ALPHA * (np.eye(N, k=1) + np.eye(N, k=-1))
    s = source.numpy().astype(np.float64)
    u, sensitivity, expected = np.zeros(N), np.zeros((N, N)), np.zeros(N)
    for k in range(1, STEPS + 1):
        u = step @ u + s
        sensitivity = step @ sensitivity + np.eye(N)
        expected += sensitivity.T @ (2.0 * (u - 0.1 * k))
    return {"grad": source.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
