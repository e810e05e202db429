"""A correct small program for gradcheck on the device: a two-layer map and a squared loss."""

import numpy as np
import warp as wp
from _common import device, report

DEV = device()


@wp.kernel
def layer(p: wp.array(dtype=float), x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.tanh(p[i] * x[i] + 0.1)


@wp.kernel
def energy(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, y[i] * y[i])


rng = np.random.default_rng(7)
p = wp.array(rng.uniform(0.5, 1.5, 32).astype(np.float32), dtype=float, requires_grad=True, device=DEV)
x = wp.array(rng.uniform(-1.0, 1.0, 32).astype(np.float32), dtype=float, device=DEV)
h = wp.zeros(32, dtype=float, requires_grad=True, device=DEV)
y = wp.zeros(32, dtype=float, requires_grad=True, device=DEV)
loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEV)
tape = wp.Tape()
with tape:
    wp.launch(layer, 32, inputs=[p, x], outputs=[h], device=DEV)
    wp.launch(layer, 32, inputs=[p, h], outputs=[y], device=DEV)
    wp.launch(energy, 32, inputs=[y], outputs=[loss], device=DEV)
tape.backward(loss)
report("loss", loss)
report("p.grad", p.grad)
