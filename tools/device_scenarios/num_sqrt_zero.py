"""WT501 on the device (with --check-numerics): the adjoint of wp.sqrt at exactly zero.

The summaries of --check-numerics are taken from device memory here.
"""

import warp as wp
from _common import device, report

DEV = device()


@wp.kernel
def spread(p: wp.array(dtype=float), x: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = 2.0 * p[i]


@wp.kernel
def radius(x: wp.array(dtype=float), r: wp.array(dtype=float)):
    i = wp.tid()
    r[i] = wp.sqrt(x[i])  # expect: WT407


@wp.kernel
def energy(r: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, r[i] * r[i])


p = wp.array([0.5, 0.0, 4.5], dtype=float, requires_grad=True, device=DEV)
x = wp.zeros(3, dtype=float, requires_grad=True, device=DEV)
r = wp.zeros(3, dtype=float, requires_grad=True, device=DEV)
loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEV)
tape = wp.Tape()
with tape:
    wp.launch(spread, dim=3, inputs=[p], outputs=[x], device=DEV)
    wp.launch(radius, dim=3, inputs=[x], outputs=[r], device=DEV)  # expect: WT501
    wp.launch(energy, dim=3, inputs=[r], outputs=[loss], device=DEV)
tape.backward(loss)
report("loss", loss)
report("p.grad", p.grad)
