"""WT202: one kernel stores an element twice into a ``retain_grad`` array (clamp by overwrite).

``limit_speed`` stores the raw speed, then overwrites the element with the cap when it
is too fast. With gradient consumption the replayed adjoint of the second store zeroes
``speed.grad[i]`` and the clamped elements correctly get no gradient; with
``retain_grad=True`` on ``speed`` the first store's adjoint reads it again, so clamped
elements leak gradient into ``w`` as if they were not clamped.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
CAP = 1.0


@wp.kernel
def limit_speed(v: wp.array(dtype=float), w: wp.array(dtype=float), speed: wp.array(dtype=float)):
    i = wp.tid()
    s = v[i] * w[i]
    speed[i] = s
    if s > CAP:
        speed[i] = CAP


@wp.kernel
def kinetic(speed: wp.array(dtype=float), mass: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, 0.5 * mass[i] * speed[i] * speed[i])


def run() -> dict:
    n = 5
    v_np = np.array([0.5, 2.0, -1.0, 3.0, 0.2])
    w_np = np.array([1.0, 0.9, 0.8, 0.7, 1.5])
    m_np = np.array([1.0, 2.0, 0.5, 1.5, 1.0])
    v = wp.array(v_np, dtype=float, device=DEVICE)
    w = wp.array(w_np, dtype=float, requires_grad=True, device=DEVICE)
    mass = wp.array(m_np, dtype=float, device=DEVICE)
    speed = wp.zeros(n, dtype=float, requires_grad=True, retain_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(limit_speed, dim=n, inputs=[v, w], outputs=[speed], device=DEVICE)  # expect: WT202
        wp.launch(kinetic, dim=n, inputs=[speed, mass], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    s = v_np * w_np
    clamped = s > CAP
    expected = np.where(clamped, 0.0, m_np * s * v_np)
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
