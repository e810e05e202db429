"""Look-alike: guarded singular points and finite selects; every gradient is exact and
nothing may be reported.

- `wp.where` over finite operands (a leaky ramp);
- `wp.sqrt` inside `if d2 > 0.0:`, after an early `return`, of `wp.max(x, eps)` and of `x + eps`;
- `wp.length`/`wp.normalize` of a possibly-zero vector (Warp's adjoints guard zero);
- `wp.pow` with an integer exponent;
- a conditional expression `wp.log(z) if z > 0.0 else 0.0` (compiled to a branch).
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
EPS = 1.0e-6
# forbid-info


@wp.func
def safe_norm(v: wp.vec3):
    d2 = wp.dot(v, v)
    if d2 < 1.0e-12:
        return 0.0
    return wp.sqrt(d2)


@wp.kernel
def mixed(vectors: wp.array[wp.vec3], x: wp.array[float], loss: wp.array[float]):
    i = wp.tid()
    v = vectors[i]
    z = x[i]
    ramp = wp.where(z > 0.0, z, 0.1 * z)
    d2 = wp.dot(v, v)
    root = float(0.0)
    if d2 > 0.0:
        root = wp.sqrt(d2)
    clamped = wp.sqrt(wp.max(z * z, EPS))
    padded = wp.sqrt(z * z + EPS)
    n = wp.normalize(v)
    logz = wp.log(z) if z > 0.0 else 0.0
    total = ramp + root + safe_norm(v) + clamped + padded + wp.length(v) + n[0] + wp.pow(z, 2.0) + logz
    wp.atomic_add(loss, 0, total)


def run() -> dict:
    v_np = np.array([[0.0, 0.0, 0.0], [3.0, 4.0, 0.0]])
    x_np = np.array([0.0, 2.0])
    vectors = wp.array(v_np, dtype=wp.vec3, requires_grad=True, device=DEVICE)
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(mixed, 2, [vectors, x, loss], device=DEVICE)
    tape.backward(loss)
    eps = 1.0e-6
    ramp = np.where(x_np > 0.0, 1.0, 0.1)
    clamped = np.where(x_np * x_np > eps, x_np / np.sqrt(np.maximum(x_np * x_np, eps)), 0.0)
    padded = x_np / np.sqrt(x_np * x_np + eps)
    logz = np.where(x_np > 0.0, 1.0 / np.where(x_np > 0.0, x_np, 1.0), 0.0)
    expected = ramp + clamped + padded + 2.0 * x_np + logz
    return {"grad": x.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
