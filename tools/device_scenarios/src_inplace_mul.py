"""WT401 on the device: an in-place product in a kernel recorded on a tape."""

import warp as wp
from _common import device, report

DEV = device()


@wp.kernel
def gain(a: wp.array(dtype=float), s: wp.array(dtype=float)):
    i = wp.tid()
    a[i] *= s[0]  # expect: WT401


@wp.kernel
def total(a: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, a[i])


a = wp.array([1.0, 2.0, 3.0], dtype=float, requires_grad=True, device=DEV)
s = wp.array([1.5], dtype=float, requires_grad=True, device=DEV)
loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEV)
tape = wp.Tape()
with tape:
    wp.launch(gain, dim=3, inputs=[a, s], device=DEV)
    wp.launch(total, dim=3, inputs=[a], outputs=[loss], device=DEV)
tape.backward(loss)
report("loss", loss)
report("s.grad", s.grad)
