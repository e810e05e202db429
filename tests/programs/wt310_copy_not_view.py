"""WT310: a copy taken for a view. The optimizer steps a copy that no backward fills.

The program wants a flat float view of its 2-D parameters for ``wp.optim.SGD`` and writes
``wp.array(x, dtype=wp.float32, requires_grad=True).flatten()``: constructing an array from
another array *copies* it (``flatten()`` is then a view of the copy). The tape reads ``x``;
``tape.backward`` fills ``x.grad``; the optimizer reads ``params.grad``, which nothing
fills, and never moves ``x``. The trace shows both facts: the copy event from ``x`` at that
line, and no backward reaching ``params``. Reported at the copy, as a copy.
"""

import numpy as np
import warp as wp
import warp.optim

wp.config.quiet = True
DEVICE = "cpu"
TARGET = np.array([[1.0, -0.5], [0.25, 0.75], [-1.0, 0.5]], dtype=np.float32)


@wp.kernel
def distance(x: wp.array2d(dtype=float), target: wp.array2d(dtype=float), loss: wp.array(dtype=float)):
    i, j = wp.tid()
    d = x[i, j] - target[i, j]
    wp.atomic_add(loss, 0, d * d)


def run() -> dict:
    x = wp.array(np.zeros((3, 2), dtype=np.float32), dtype=float, requires_grad=True, device=DEVICE)
    target = wp.array(TARGET, dtype=float, device=DEVICE)
    params = wp.array(x, dtype=wp.float32, requires_grad=True).flatten()  # expect: WT310
    optimizer = wp.optim.SGD([params], lr=0.1)
    used, truth = np.zeros(6), np.zeros(6)
    for _ in range(3):
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        tape = wp.Tape()
        with tape:
            wp.launch(distance, (3, 2), inputs=[x, target], outputs=[loss], device=DEVICE)
        tape.backward(loss)
        truth = (2.0 * (x.numpy() - TARGET)).reshape(-1)
        used = params.grad.numpy().copy()  # the gradient the optimizer steps with
        optimizer.step([params.grad])
        tape.zero()
    return {"grad": used, "expected": truth}


if __name__ == "__main__":
    run()
