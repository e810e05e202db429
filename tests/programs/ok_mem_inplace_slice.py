"""Look-alike (fine): a local vector read from an array element, updated through slices
with ``+=``/``-=``, and stored back into the same element.

``apply_offsets`` loads ``pose[i]`` (a ``quat``) and ``frame[i]`` (a ``transform``), adds
slices of ``delta[i]`` and scaled copies, and stores both back. Every use of the old
values is linear (sums), so the adjoint never needs them and the gradient is exact,
although the replay sees the updated arrays.

(Not shown here: a plain component *assignment* ``q[:2] = d`` or ``q[2] *= 3.0`` on a
value loaded from an array. Warp 1.19 then still passes the gradient of the overwritten
component to the old value, with or without an in-place store: a kernel-source hazard,
not an in-place one.)
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"


@wp.kernel
def init(x: wp.array(dtype=float), pose: wp.array(dtype=wp.quat), frame: wp.array(dtype=wp.transform)):
    i = wp.tid()
    s = x[i] * x[i]
    pose[i] = wp.quat(s, 2.0 * s, 3.0 * s, 4.0 * s)
    frame[i] = wp.transform(wp.vec3(s, -s, 0.5 * s), wp.quat(0.0, 0.0, s, 1.0))


@wp.kernel
def apply_offsets(
    delta: wp.array(dtype=wp.vec2), pose: wp.array(dtype=wp.quat), frame: wp.array(dtype=wp.transform)
):
    i = wp.tid()
    q = pose[i]
    q[1:3] += delta[i]
    q[3] -= 2.0 * delta[i][0]
    pose[i] = q

    t = frame[i]
    t[4:6] -= delta[i]
    t[0:2] += 3.0 * delta[i]
    t = t + wp.transform(wp.vec3(delta[i][1], 0.0, 0.0), wp.quat(0.0, 0.0, 0.0, 0.0))
    frame[i] = t


@wp.kernel
def total(pose: wp.array(dtype=wp.quat), frame: wp.array(dtype=wp.transform), loss: wp.array(dtype=float)):
    i = wp.tid()
    q = pose[i]
    t = frame[i]
    s = float(0.0)
    for k in range(4):
        s += q[k] * q[k]
    for k in range(7):
        s += t[k] * t[k]
    wp.atomic_add(loss, 0, s)


def forward_np(x: np.ndarray, d: np.ndarray) -> float:
    total_value = 0.0
    for xi, di in zip(x, d):
        s = xi * xi
        q = np.array([s, 2.0 * s, 3.0 * s, 4.0 * s])
        q[1:3] += di
        q[3] -= 2.0 * di[0]
        t = np.array([s, -s, 0.5 * s, 0.0, 0.0, s, 1.0])
        t[4:6] -= di
        t[0:2] += 3.0 * di
        t[0] += di[1]
        total_value += float(np.sum(q * q) + np.sum(t * t))
    return total_value


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    flat = p.reshape(-1)
    for j in range(flat.size):
        step = np.zeros_like(flat)
        step[j] = eps
        grad.reshape(-1)[j] = (f((flat + step).reshape(p.shape)) - f((flat - step).reshape(p.shape))) / (
            2 * eps
        )
    return grad


def run() -> dict:
    x0 = np.array([0.4, -0.8, 1.2])
    d0 = np.array([[0.5, -1.0], [2.0, 0.3], [-0.7, 1.5]])
    x = wp.array(x0, dtype=float, requires_grad=True, device=DEVICE)
    delta = wp.array(d0, dtype=wp.vec2, requires_grad=True, device=DEVICE)
    pose = wp.zeros(3, dtype=wp.quat, requires_grad=True, device=DEVICE)
    frame = wp.zeros(3, dtype=wp.transform, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(init, dim=3, inputs=[x], outputs=[pose, frame], device=DEVICE)
        wp.launch(apply_offsets, dim=3, inputs=[delta], outputs=[pose, frame], device=DEVICE)
        wp.launch(total, dim=3, inputs=[pose, frame], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    grad = np.concatenate([x.grad.numpy(), delta.grad.numpy().reshape(-1)])
    expected = np.concatenate(
        [
            central_differences(lambda p: forward_np(p, d0), x0),
            central_differences(lambda p: forward_np(x0, p), d0).reshape(-1),
        ]
    )
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
