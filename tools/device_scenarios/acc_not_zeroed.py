"""WT203 on the device: a training loop that never zeroes the gradient."""

import warp as wp
from _common import device, report

DEV = device()


@wp.kernel
def loss_kernel(x: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = x[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def step(x: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * g[i]


x = wp.array([1.0, 2.0, 3.0, 4.0], dtype=float, requires_grad=True, device=DEV)
target = wp.array([0.5, 0.5, 0.5, 0.5], dtype=float, device=DEV)
for _ in range(4):
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEV)
    tape = wp.Tape()
    with tape:
        wp.launch(loss_kernel, dim=4, inputs=[x, target], outputs=[loss], device=DEV)
    tape.backward(loss)  # expect: WT203
    wp.launch(step, dim=4, inputs=[x, x.grad, 0.1], device=DEV)
    report("loss", loss)
report("x", x)
