"""Fixed twin of wt102_normalize_inplace: normalized directions are written to a new array."""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 3


@wp.kernel
def aim(base: wp.array(dtype=wp.vec3), offset: wp.array(dtype=wp.vec3), d: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    d[i] = base[i] + offset[i]


@wp.kernel
def normalize_directions(d: wp.array(dtype=wp.vec3), n: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    n[i] = wp.normalize(d[i])


@wp.kernel
def alignment_loss(d: wp.array(dtype=wp.vec3), target: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    c = wp.dot(d[i], target[i])
    wp.atomic_add(loss, 0, (1.0 - c) * (1.0 - c))


def reference_loss(offset_flat, base, target):
    d = base + offset_flat.reshape(N, 3)
    d = d / np.linalg.norm(d, axis=1, keepdims=True)
    c = np.sum(d * target, axis=1)
    return np.sum((1.0 - c) ** 2)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    base0 = np.array([[2.0, 0.0, 0.0], [0.0, 3.0, 1.0], [1.0, 1.0, 2.5]])
    offset0 = np.array([[0.2, 0.5, -0.1], [0.3, -0.4, 0.0], [-0.5, 0.2, 0.4]])
    target0 = np.array([[0.0, 1.0, 0.0], [0.6, 0.8, 0.0], [0.0, 0.0, 1.0]])

    base = wp.array(base0, dtype=wp.vec3, device=DEVICE)
    offset = wp.array(offset0, dtype=wp.vec3, requires_grad=True, device=DEVICE)
    target = wp.array(target0, dtype=wp.vec3, device=DEVICE)
    d = wp.zeros(N, dtype=wp.vec3, requires_grad=True, device=DEVICE)
    n = wp.zeros(N, dtype=wp.vec3, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(aim, dim=N, inputs=[base, offset], outputs=[d], device=DEVICE)
        wp.launch(normalize_directions, dim=N, inputs=[d], outputs=[n], device=DEVICE)
        wp.launch(alignment_loss, dim=N, inputs=[n, target], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = central_differences(lambda o: reference_loss(o, base0, target0), offset0.ravel()).reshape(N, 3)
    return {"grad": offset.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
