"""Fixed twin of wt102_func_inplace: the function writes the clamped velocity to a separate array."""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 4
VMAX = 1.0


@wp.kernel
def actuate(u: wp.array(dtype=float), gain: wp.array(dtype=float), v: wp.array(dtype=float)):
    i = wp.tid()
    v[i] = gain[i] * u[i]


@wp.func
def limit(v: wp.array(dtype=float), v_limited: wp.array(dtype=float), i: int):
    s = v[i]
    if s > VMAX:
        s = VMAX
    if s < -VMAX:
        s = -VMAX
    v_limited[i] = s


@wp.kernel
def limit_speed(v: wp.array(dtype=float), v_limited: wp.array(dtype=float)):
    i = wp.tid()
    limit(v, v_limited, i)


@wp.kernel
def kinetic_loss(v: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = v[i] * v[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


def reference_loss(gain, u, target):
    v = np.clip(gain * u, -VMAX, VMAX)
    return np.sum((v * v - target) ** 2)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    u0 = np.array([0.5, 2.0, -1.5, 0.8])
    gain0 = np.array([1.2, 0.9, 1.1, 0.7])
    target0 = np.array([0.2, 0.5, 0.3, 0.1])

    u = wp.array(u0, dtype=float, device=DEVICE)
    gain = wp.array(gain0, dtype=float, requires_grad=True, device=DEVICE)
    target = wp.array(target0, dtype=float, device=DEVICE)
    v = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    v_limited = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(actuate, dim=N, inputs=[u, gain], outputs=[v], device=DEVICE)
        wp.launch(limit_speed, dim=N, inputs=[v], outputs=[v_limited], device=DEVICE)
        wp.launch(kinetic_loss, dim=N, inputs=[v_limited, target], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = central_differences(lambda g: reference_loss(g, u0, target0), gain0)
    return {"grad": gain.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
