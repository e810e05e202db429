"""A captured forward + backward replayed every optimizer step (the Newton diffsim shape).

Correct: each replay zeroes the loss, runs the captured forward and backward, and the
optimizer steps on the gradient; the tape's gradients are zeroed after each step.
"""

import warp as wp
from _common import device, report

DEV = device()


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i] - 0.5 * x[i]


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, y[wp.tid()])


@wp.kernel
def descend(x: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * grad[i]


x = wp.array([1.0, -2.0, 0.5, 3.0], dtype=float, requires_grad=True, device=DEV)
y = wp.zeros(4, dtype=float, requires_grad=True, device=DEV)
loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEV)
tape = wp.Tape()


def forward_backward() -> None:
    loss.zero_()
    with tape:
        wp.launch(square, 4, inputs=[x], outputs=[y], device=DEV)
        wp.launch(total, 4, inputs=[y], outputs=[loss], device=DEV)
    tape.backward(loss)


with wp.ScopedCapture(device=DEV) as capture:
    forward_backward()
for _ in range(50):
    wp.capture_launch(capture.graph)
    wp.launch(descend, 4, inputs=[x, x.grad, 0.05], device=DEV)
    tape.zero()
report("x", x)
report("loss", loss)
