"""Look-alike of WT501: NaN as a deliberate sentinel, masked and never differentiated.

A preprocessing launch (outside the tape) marks missing measurements with NaN; the loss
kernel skips them with ``wp.isnan``. The NaN is the program's own business: nothing
non-finite reaches a gradient.
"""
# check-numerics

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def mark_missing(raw: wp.array(dtype=float), data: wp.array(dtype=float)):
    i = wp.tid()
    data[i] = wp.where(raw[i] < 0.0, wp.nan, raw[i])


@wp.kernel
def fit(data: wp.array(dtype=float), w: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = data[i]
    if not wp.isnan(d):
        e = w[0] - d
        wp.atomic_add(loss, 0, e * e)


def run() -> dict:
    raw_np = np.array([1.0, -1.0, 3.0, -1.0], dtype=np.float32)
    raw = wp.array(raw_np, dtype=float, device=DEVICE)
    data = wp.zeros(4, dtype=float, device=DEVICE)
    wp.launch(mark_missing, dim=4, inputs=[raw], outputs=[data], device=DEVICE)
    w = wp.array([0.5], dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(fit, dim=4, inputs=[data, w], outputs=[loss], device=DEVICE)
    tape.backward(loss)
    expected = np.array([2.0 * ((0.5 - 1.0) + (0.5 - 3.0))])
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
