"""WT105 across modules: ``episode.finish()`` is called inside ``with tape:`` after the loss.

``Episode.finish`` (wt105_split_episode.py) launches a kernel that carries the final
state into the initial one. Indented inside the tape it is recorded after the loss,
does not feed it, and rewrites the initial state the first step read.
Entry point of the wt105_split program.
"""

import numpy as np
import warp as wp
import wt105_split_episode as episode_module

wp.config.quiet = True

DEVICE = "cpu"
N = 3
STEPS = 4


@wp.kernel
def sum_squares(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, q[i] * q[i])


def reference_loss(stiffness, q0, v0):
    q = q0.astype(np.float64)
    v = v0.astype(np.float64)
    for _ in range(STEPS):
        v = v - episode_module.DT * stiffness * np.sin(q)
        q = q + episode_module.DT * v
    return np.sum(q * q)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    q0 = np.array([1.0, -0.6, 2.2])
    v0 = np.array([0.3, 0.0, -0.5])
    k0 = np.array([2.0, 3.5, 1.2])

    stiffness = wp.array(k0, dtype=float, requires_grad=True, device=DEVICE)
    episode = episode_module.Episode(q0, v0, STEPS, DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        q_final = episode.simulate(stiffness)
        wp.launch(sum_squares, dim=N, inputs=[q_final], outputs=[loss], device=DEVICE)
        episode.finish()
    tape.backward(loss)

    expected = central_differences(lambda kk: reference_loss(kk, q0, v0), k0)
    return {"grad": stiffness.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
