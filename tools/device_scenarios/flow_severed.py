"""WT301 on the device: an intermediate allocated without requires_grad."""

import warp as wp
from _common import device, report

DEV = device()


@wp.kernel
def scale(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i]


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i] * y[i])


x = wp.array([1.0, -2.0, 0.5], dtype=float, requires_grad=True, device=DEV)
y = wp.zeros(3, dtype=float, device=DEV)  # expect: WT301
loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEV)
tape = wp.Tape()
with tape:
    wp.launch(scale, dim=3, inputs=[x], outputs=[y], device=DEV)
    wp.launch(total, dim=3, inputs=[y], outputs=[loss], device=DEV)
tape.backward(loss)
report("loss", loss)
report("x.grad", x.grad)
