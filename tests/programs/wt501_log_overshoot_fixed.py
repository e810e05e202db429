"""Fixed twin of wt501_log_overshoot: the radii are parameterized by their logarithm, so no
update can leave the domain; the same step size converges.
"""
# check-numerics

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
N = 3
STEPS = 12
LR = 0.1


@wp.kernel
def log_misfit(log_r: wp.array(dtype=float), log_target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = log_r[i] - log_target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(p: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * grad[i]


def run() -> dict:
    targets = np.array([0.1, 0.4, 0.8], dtype=np.float32)
    r = wp.array(
        np.log(np.array([3.0, 1.0, 1.5], dtype=np.float32)), dtype=float, requires_grad=True, device=DEVICE
    )
    log_target = wp.array(np.log(targets), dtype=float, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    grad = expected = None
    for _ in range(STEPS):
        loss.zero_()
        tape.reset()
        with tape:
            wp.launch(log_misfit, dim=N, inputs=[r, log_target], outputs=[loss], device=DEVICE)
        tape.backward(loss)
        grad = r.grad.numpy().copy()
        expected = 2.0 * (r.numpy().astype(np.float64) - np.log(targets))
        wp.launch(sgd, dim=N, inputs=[r, r.grad, LR], device=DEVICE)
        tape.zero()
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
