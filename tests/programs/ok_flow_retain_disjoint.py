"""Look-alike of WT201/WT202: one kernel launched twice into a ``retain_grad`` buffer, disjoint halves.

A batch of two samples is written into one feature buffer (kept with
``retain_grad=True`` for inspection) by launching ``embed`` once per sample on a slice
of the buffer. Same kernel, same base allocation, same parameters, but the two launches
write non-overlapping memory, so no element is written twice: the gradient is exact.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def embed(x: wp.array(dtype=float), w: wp.array(dtype=float), feat: wp.array(dtype=float)):
    i = wp.tid()
    feat[i] = x[i] * w[i] + 0.5 * x[i] * x[i] * w[i] * w[i]


@wp.kernel
def energy(feat: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, feat[i] * feat[i])


def run() -> dict:
    n = 4
    xa_np = np.array([0.2, -0.5, 1.0, 0.7])
    xb_np = np.array([1.5, 0.3, -0.8, 0.1])
    w_np = np.array([0.9, 1.3, -0.6, 0.4])
    xa = wp.array(xa_np, dtype=float, device=DEVICE)
    xb = wp.array(xb_np, dtype=float, device=DEVICE)
    w = wp.array(w_np, dtype=float, requires_grad=True, device=DEVICE)
    feat = wp.zeros(2 * n, dtype=float, requires_grad=True, retain_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(embed, dim=n, inputs=[xa, w], outputs=[feat[0:n]], device=DEVICE)
        wp.launch(embed, dim=n, inputs=[xb, w], outputs=[feat[n : 2 * n]], device=DEVICE)
        wp.launch(energy, dim=2 * n, inputs=[feat], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = np.zeros(n)
    for x_np in (xa_np, xb_np):
        f = x_np * w_np + 0.5 * (x_np * w_np) ** 2
        expected += 2.0 * f * (x_np + x_np * x_np * w_np)
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
