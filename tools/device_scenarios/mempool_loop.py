"""A training loop that rebuilds its parameter every iteration, from the mempool on CUDA.

Allocations come from the stream-ordered memory pool where the device supports it, so
addresses are reused at once: identity must come from allocation ids, not pointers.
Correct: each iteration's parameter is a new array whose gradient starts at zero.
"""

import numpy as np
import warp as wp
from _common import device, report

DEV = device()
if wp.is_mempool_supported(DEV):
    wp.set_mempool_enabled(DEV, True)
print("mempool", wp.is_mempool_enabled(DEV))


@wp.kernel
def model(p: wp.array(dtype=float), x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.tanh(p[i] * x[i])


@wp.kernel
def mse(y: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


x = wp.array(np.linspace(-1.0, 1.0, 64, dtype=np.float32), dtype=float, device=DEV)
target = wp.array(np.linspace(-0.5, 0.5, 64, dtype=np.float32), dtype=float, device=DEV)
p_np = np.full(64, 0.3, dtype=np.float32)
for _ in range(20):
    p = wp.array(p_np, dtype=float, requires_grad=True, device=DEV)
    y = wp.zeros(64, dtype=float, requires_grad=True, device=DEV)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEV)
    tape = wp.Tape()
    with tape:
        wp.launch(model, 64, inputs=[p, x], outputs=[y], device=DEV)
        wp.launch(mse, 64, inputs=[y, target], outputs=[loss], device=DEV)
    tape.backward(loss)
    p_np = p.numpy() - 0.5 * p.grad.numpy()
report("loss", loss)
report("p", p)
