"""WT102 in a loop whose parameter lives in NumPy and is rebuilt at the top of each iteration.

The optimizer state is a NumPy array ``q0_np``; each iteration uploads it with
``q0 = wp.array(q0_np, dtype=wp.vec3, requires_grad=True)`` (a new array, a fresh zero
gradient), records a tape, reads ``q0.grad.numpy()`` and updates ``q0_np`` in NumPy.
The bug: ``squash`` maps the positions through ``tanh`` in place, so its adjoint
re-reads the squashed value and differentiates ``tanh`` at the wrong point.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 3
ITERS = 3
DT = 0.5
LR = 0.1


@wp.kernel
def displace(q0: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), q: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    q[i] = q0[i] + DT * v[i]


@wp.kernel
def squash(q: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    p = q[i]
    q[i] = wp.vec3(wp.tanh(p[0]), wp.tanh(p[1]), wp.tanh(p[2]))


@wp.kernel
def distance(q: wp.array(dtype=wp.vec3), target: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, wp.length_sq(q[i] - target[i]))


def reference_grad(q0_np, v_np, target_np):
    x = q0_np + DT * v_np
    s = np.tanh(x)
    return 2.0 * (s - target_np) * (1.0 - s * s)


def run() -> dict:
    q0_np = np.array([[0.2, -0.4, 0.9], [1.1, 0.3, -0.6], [-0.8, 0.5, 0.1]])
    v_np = np.array([[0.5, 0.2, -0.3], [-0.4, 0.6, 0.2], [0.3, -0.2, 0.4]])
    target_np = np.array([[0.1, 0.0, 0.3], [0.5, 0.4, -0.2], [-0.3, 0.2, 0.4]])
    v = wp.array(v_np, dtype=wp.vec3, device=DEVICE)
    target = wp.array(target_np, dtype=wp.vec3, device=DEVICE)
    grads, expected = [], []
    for _ in range(ITERS):
        q0 = wp.array(q0_np, dtype=wp.vec3, requires_grad=True, device=DEVICE)
        q = wp.zeros(N, dtype=wp.vec3, requires_grad=True, device=DEVICE)
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        tape = wp.Tape()
        with tape:
            wp.launch(displace, dim=N, inputs=[q0, v], outputs=[q], device=DEVICE)
            wp.launch(squash, dim=N, inputs=[q], device=DEVICE)  # expect: WT102
            wp.launch(distance, dim=N, inputs=[q, target], outputs=[loss], device=DEVICE)
        tape.backward(loss)
        g = q0.grad.numpy().astype(np.float64)
        grads.append(g.reshape(-1))
        expected.append(reference_grad(q0_np, v_np, target_np).reshape(-1))
        q0_np = q0_np - LR * g
    return {"grad": np.concatenate(grads), "expected": np.concatenate(expected)}


if __name__ == "__main__":
    run()
