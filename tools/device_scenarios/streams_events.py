"""Forward on one stream, loss on another, ordered by an event (CUDA only).

Correct: the event orders the two streams; the backward runs on the default stream.
"""

import sys

import warp as wp
from _common import device, report

DEV = device()
if not wp.get_device(DEV).is_cuda:
    print("skip: streams and events need a CUDA device")
    sys.exit(77)


@wp.kernel
def model(p: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.sin(p[i]) * p[i]


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, y[wp.tid()])


p = wp.array([0.1 * k for k in range(32)], dtype=float, requires_grad=True, device=DEV)
y = wp.zeros(32, dtype=float, requires_grad=True, device=DEV)
loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEV)
s1 = wp.Stream(DEV)
s2 = wp.Stream(DEV)
tape = wp.Tape()
with tape:
    with wp.ScopedStream(s1):
        wp.launch(model, 32, inputs=[p], outputs=[y])
    ready = s1.record_event()
    s2.wait_event(ready)
    with wp.ScopedStream(s2):
        wp.launch(total, 32, inputs=[y], outputs=[loss])
wp.synchronize_device(DEV)
tape.backward(loss)
report("loss", loss)
report("p.grad", p.grad)
