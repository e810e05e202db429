"""WT101: two state buffers used in turn ("ping-pong") over six steps on one tape.

Step t reads ``bufs[t % 2]`` and writes ``bufs[(t + 1) % 2]``. From step 2 on every
launch overwrites a buffer that an earlier launch on the tape read, so the backward of
the early steps runs against late states.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 3
STEPS = 6
DT = 0.25


@wp.kernel
def advance(x: wp.array(dtype=float), w: wp.array(dtype=float), x_next: wp.array(dtype=float)):
    i = wp.tid()
    x_next[i] = x[i] + DT * wp.sin(w[i] * x[i])


@wp.kernel
def sum_squares(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


def reference_loss(w, x0):
    x = x0.astype(np.float64)
    for _ in range(STEPS):
        x = x + DT * np.sin(w * x)
    return np.sum(x * x)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    x0 = np.array([0.4, 1.1, -0.7])
    w0 = np.array([1.3, 0.9, 2.0])

    w = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
    bufs = [
        wp.array(x0, dtype=float, requires_grad=True, device=DEVICE),
        wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE),
    ]
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        for t in range(STEPS):
            src, dst = bufs[t % 2], bufs[(t + 1) % 2]
            wp.launch(advance, dim=N, inputs=[src, w], outputs=[dst], device=DEVICE)  # expect: WT101
        wp.launch(sum_squares, dim=N, inputs=[bufs[STEPS % 2]], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = central_differences(lambda ww: reference_loss(ww, x0), w0)
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
