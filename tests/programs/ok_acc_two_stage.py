"""Look-alike of WT204: a second stage recorded on the tape after a first backward.

Stage one computes ``h`` and a first loss and is backpropagated; its gradient is kept.
Then a second stage that reads ``h`` is recorded on the same tape, the gradients are
zeroed and the second loss is backpropagated: that backward replays stage one on
purpose (the second loss depends on ``w`` through ``h``), and stage one's own loss
gets no seed. The tape is not reset, more launches were recorded between the two
backward calls, and both gradients are right: the second stage accumulates into
memory of its own.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def stage_one(w: wp.array(dtype=float), h: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    h[i] = w[i] * w[i]
    wp.atomic_add(loss, 0, w[i] * w[i])


@wp.kernel
def stage_two(h: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, 3.0 * h[i])


def run() -> dict:
    w_np = np.array([0.5, -1.0, 2.0])
    w = wp.array(w_np, dtype=float, requires_grad=True, device=DEVICE)
    h = wp.zeros(3, dtype=float, requires_grad=True, device=DEVICE)
    loss1 = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    loss2 = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(stage_one, dim=3, inputs=[w], outputs=[h, loss1], device=DEVICE)
    tape.backward(loss1)
    grad1 = w.grad.numpy().copy()
    tape.zero()
    with tape:
        wp.launch(stage_two, dim=3, inputs=[h], outputs=[loss2], device=DEVICE)
    tape.backward(loss2)
    grad2 = w.grad.numpy().copy()
    return {"grad": np.concatenate([grad1, grad2]), "expected": np.concatenate([2.0 * w_np, 6.0 * w_np])}


if __name__ == "__main__":
    run()
