"""WT503 named by its cause: the scratch buffer of ``wp.empty_like`` has no gradient (WT301).

``warped = wp.empty_like(points)`` looks like a neutral allocation, but ``points`` is
plain input data without ``requires_grad``, and ``empty_like`` copies that flag. The
warped points depend on the deformation parameters, yet the chain is cut at them:
``theta`` gets zero gradient.
"""

# check-numerics

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def deform(points: wp.array(dtype=wp.vec2), theta: wp.array(dtype=float), warped: wp.array(dtype=wp.vec2)):
    i = wp.tid()
    c = wp.cos(theta[0])
    s = wp.sin(theta[0])
    p = points[i]
    warped[i] = wp.vec2(c * p[0] - s * p[1], s * p[0] + c * p[1]) * theta[1]


@wp.kernel
def chamfer_to_targets(
    warped: wp.array(dtype=wp.vec2), targets: wp.array(dtype=wp.vec2), loss: wp.array(dtype=float)
):
    i = wp.tid()
    d = warped[i] - targets[i]
    wp.atomic_add(loss, 0, wp.dot(d, d))


def forward_np(theta, points, targets):
    c, s = np.cos(theta[0]), np.sin(theta[0])
    rot = np.stack([c * points[:, 0] - s * points[:, 1], s * points[:, 0] + c * points[:, 1]], axis=1)
    return float(np.sum((rot * theta[1] - targets) ** 2))


def central_differences(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2.0 * eps)
    return g


def run() -> dict:
    p_np = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.5], [0.3, -0.7]])
    t_np = np.array([[0.0, 1.2], [-1.1, 0.0], [-0.4, -1.0], [0.8, 0.2]])
    th_np = np.array([0.4, 0.9])
    points = wp.array(p_np, dtype=wp.vec2, device=DEVICE)
    targets = wp.array(t_np, dtype=wp.vec2, device=DEVICE)
    theta = wp.array(th_np, dtype=float, requires_grad=True, device=DEVICE)  # expect: WT503
    warped = wp.empty_like(points)  # expect: WT301
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(deform, dim=len(p_np), inputs=[points, theta], outputs=[warped], device=DEVICE)
        wp.launch(chamfer_to_targets, dim=len(p_np), inputs=[warped, targets], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = central_differences(lambda th: forward_np(th, p_np, t_np), th_np)
    return {"grad": theta.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
