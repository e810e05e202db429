"""WT501 after a healthy descent: a step overshoots a parameter out of ``log``'s domain.

Radii are fitted in log space: the loss is the squared difference of ``log(r)`` and the log
of the target. The loss falls step after step, but the gradient ``2 (log r - log t) / r``
steepens as ``r`` shrinks, and one update carries a radius below zero: ``wp.log`` of a
negative is NaN. The inputs of that launch are moderate (a radius of -0.1 after values
around 1): a domain origin, reported as WT501 at the launch; nothing grew, so no divergence.
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
def log_misfit(r: wp.array(dtype=float), log_target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = wp.log(r[i]) - log_target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(p: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * grad[i]


def run() -> dict:
    targets = np.array([0.1, 0.4, 0.8], dtype=np.float32)
    r = wp.array(np.array([3.0, 1.0, 1.5], dtype=np.float32), dtype=float, requires_grad=True, device=DEVICE)
    log_t = wp.array(np.log(targets), dtype=float, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    grad = expected = None
    for _ in range(STEPS):
        loss.zero_()
        tape.reset()
        with tape:
            wp.launch(log_misfit, dim=N, inputs=[r, log_t], outputs=[loss], device=DEVICE)  # expect: WT501
        tape.backward(loss)
        r_np = r.numpy().astype(np.float64)
        grad = r.grad.numpy().copy()
        with np.errstate(invalid="ignore"):
            expected = 2.0 * (np.log(r_np) - np.log(targets)) / r_np
        wp.launch(sgd, dim=N, inputs=[r, r.grad, LR], device=DEVICE)
        tape.zero()
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
