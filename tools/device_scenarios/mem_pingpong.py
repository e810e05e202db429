"""WT101 on the device: two state buffers used in turn on one tape."""

import warp as wp
from _common import device, report

DEV = device()


@wp.kernel
def advance(x: wp.array(dtype=float), w: wp.array(dtype=float), x_next: wp.array(dtype=float)):
    i = wp.tid()
    x_next[i] = x[i] + 0.25 * wp.sin(w[i] * x[i])


@wp.kernel
def sum_squares(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


w = wp.array([1.3, 0.9, 2.0], dtype=float, requires_grad=True, device=DEV)
bufs = [
    wp.array([0.4, 1.1, -0.7], dtype=float, requires_grad=True, device=DEV),
    wp.zeros(3, dtype=float, requires_grad=True, device=DEV),
]
loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEV)
tape = wp.Tape()
with tape:
    for t in range(6):
        nxt = bufs[(t + 1) % 2]
        wp.launch(advance, dim=3, inputs=[bufs[t % 2], w], outputs=[nxt], device=DEV)  # expect: WT101
    wp.launch(sum_squares, dim=3, inputs=[bufs[0]], outputs=[loss], device=DEV)
tape.backward(loss)
report("loss", loss)
report("w.grad", w.grad)
