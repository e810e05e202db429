"""WT202 fixed twin: clamp in a local, store once; ``speed`` keeps ``retain_grad=True``."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
CAP = 1.0


@wp.kernel
def limit_speed(v: wp.array(dtype=float), w: wp.array(dtype=float), speed: wp.array(dtype=float)):
    i = wp.tid()
    s = v[i] * w[i]
    if s > CAP:
        s = CAP
    speed[i] = s


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
        wp.launch(limit_speed, dim=n, inputs=[v, w], outputs=[speed], device=DEVICE)
        wp.launch(kinetic, dim=n, inputs=[speed, mass], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    s = v_np * w_np
    clamped = s > CAP
    expected = np.where(clamped, 0.0, m_np * s * v_np)
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
