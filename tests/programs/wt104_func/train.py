"""WT104 through a ``@wp.func``: the kernel calls a function that updates a struct field in place.

``drag_step`` only calls ``apply_quadratic_drag`` (wt104_func_physics.py), which reads
``body.x[i]`` and stores into it; the kernel source itself never mentions the store.
Entry point of the wt104_func program.
"""

import numpy as np
import warp as wp
import wt104_func_physics as physics

wp.config.quiet = True

DEVICE = "cpu"
N = 3
STEPS = 3


def reference_loss(drag, x0, target):
    x = x0.astype(np.float64)
    for _ in range(STEPS):
        x = x - physics.DT * drag * x * np.abs(x)
    return np.sum((x - target) ** 2)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    x0 = np.array([2.0, -1.5, 1.0])
    drag0 = np.array([0.5, 0.8, 0.3])
    target0 = np.array([0.5, -0.5, 0.2])

    body = physics.Body()
    body.x = wp.array(x0, dtype=float, requires_grad=True, device=DEVICE)
    body.drag = wp.array(drag0, dtype=float, requires_grad=True, device=DEVICE)
    target = wp.array(target0, dtype=float, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        for _ in range(STEPS):
            wp.launch(physics.drag_step, dim=N, inputs=[body], device=DEVICE)  # expect: WT104
        wp.launch(physics.distance_loss, dim=N, inputs=[body, target], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = central_differences(lambda d: reference_loss(d, x0, target0), drag0)
    return {"grad": body.drag.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
