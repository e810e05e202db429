"""Look-alike: loops whose gradients are exact and must stay silent.

- `+=` accumulation in a dynamic loop and in nested dynamic loops;
- a value computed fresh each iteration and read after the loop;
- `*=` on a local scalar in an unrolled (literal, static) loop;
- a component of a local vector set once per unrolled iteration (`v[k] = ...`).
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
# forbid-info


@wp.kernel
def moments(x: wp.array[float], n: int, out: wp.array[float]):
    s = float(0.0)
    last = float(0.0)
    for k in range(n):
        s += x[k] * x[k]
        last = x[k] * 2.0
    pair = float(0.0)
    for a in range(n):
        for b in range(n):
            pair += x[a] * x[b]
    p = float(1.0)
    for k in range(3):
        p *= x[k]
    v = wp.vec3(0.0)
    for k in range(3):
        v[k] = x[k] * float(k + 1)
    out[0] = s + last + pair + p + wp.dot(v, wp.vec3(1.0))


def run() -> dict:
    x_np = np.array([1.5, 2.0, 3.0])
    x = wp.array(x_np, dtype=float, requires_grad=True, device=DEVICE)
    out = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(moments, 1, [x, 3, out], device=DEVICE)
    tape.backward(grads={out: wp.ones(1, dtype=float, device=DEVICE)})
    expected = (
        2.0 * x_np
        + np.array([0.0, 0.0, 2.0])
        + 2.0 * x_np.sum()
        + np.prod(x_np) / x_np
        + np.array([1.0, 2.0, 3.0])
    )
    return {"grad": x.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
