"""WT203 behind a divergence: unzeroed gradients turn a stable descent into a blow-up.

The edge lengths of four cubes are fitted to target volumes by gradient descent. Each
iteration records a fresh tape and backpropagates, but nothing zeroes ``edge.grad``: the
update applies the running sum of every past gradient, a heavy ball without friction. At the
step size 0.03 the correct descent converges; the accumulated one overshoots, and because the
volume is cubic in the edge, each overshoot lands where the curvature is larger: the
oscillation grows until the edges, then the volumes, overflow float32. The divergence warning
names WT203 as the likely cause; the kernel that overflows is innocent (no WT501).
"""
# check-numerics

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
N = 4
STEPS = 40
LR = 0.03


@wp.kernel
def volume(edge: wp.array(dtype=float), vol: wp.array(dtype=float)):
    i = wp.tid()
    s = edge[i]
    vol[i] = s * s * s


@wp.kernel
def misfit(vol: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = vol[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(p: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    p[i] = p[i] - lr * grad[i]


def run() -> dict:
    target_np = np.array([1.0, 2.0, 0.5, 1.5], dtype=np.float32)
    edge = wp.array(
        np.array([0.5, 0.6, 0.4, 0.7], dtype=np.float32), dtype=float, requires_grad=True, device=DEVICE
    )
    vol = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    target = wp.array(target_np, dtype=float, device=DEVICE)
    used = expected = None
    for step in range(STEPS):
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        tape = wp.Tape()
        with tape:
            wp.launch(volume, dim=N, inputs=[edge], outputs=[vol], device=DEVICE)
            wp.launch(misfit, dim=N, inputs=[vol, target], outputs=[loss], device=DEVICE)
        tape.backward(loss)  # expect: WT203
        if step == 1:  # the first gradient that holds two backward passes
            s = edge.numpy().astype(np.float64)
            used, expected = edge.grad.numpy().copy(), 6.0 * (s**3 - target_np) * s**2
        wp.launch(sgd, dim=N, inputs=[edge, edge.grad, LR], device=DEVICE)  # expect: WT505
    return {"grad": used, "expected": expected}


if __name__ == "__main__":
    run()
