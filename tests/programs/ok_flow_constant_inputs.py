"""Look-alike of WT301: constant targets, masks and index arrays allocated without grad.

``targets`` (``wp.array``), ``mask`` (``wp.zeros`` filled by a taped launch from the
constant labels), ``index`` (int gather indices) and ``weights`` (``wp.empty_like`` of
the no-grad targets) carry no gradient, and that is correct: no parameter influences
them. Every array on the path from the parameters to the loss has ``requires_grad``.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def build_mask(labels: wp.array(dtype=int), mask: wp.array(dtype=float)):
    i = wp.tid()
    if labels[i] > 0:
        mask[i] = 1.0
    else:
        mask[i] = 0.0


@wp.kernel
def fill_weights(targets: wp.array(dtype=float), weights: wp.array(dtype=float)):
    i = wp.tid()
    weights[i] = 1.0 / (1.0 + wp.abs(targets[i]))


@wp.kernel
def gather_predict(
    table: wp.array(dtype=float),
    index: wp.array(dtype=int),
    scale: wp.array(dtype=float),
    pred: wp.array(dtype=float),
):
    i = wp.tid()
    pred[i] = scale[0] * wp.sin(table[index[i]])


@wp.kernel
def masked_loss(
    pred: wp.array(dtype=float),
    targets: wp.array(dtype=float),
    mask: wp.array(dtype=float),
    weights: wp.array(dtype=float),
    loss: wp.array(dtype=float),
):
    i = wp.tid()
    d = pred[i] - targets[i]
    wp.atomic_add(loss, 0, mask[i] * weights[i] * d * d)


def objective_np(table, scale, index, targets, mask, weights):
    pred = scale * np.sin(table[index])
    return float(np.sum(mask * weights * (pred - targets) ** 2))


def central_differences(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2.0 * eps)
    return g


def run() -> dict:
    table_np = np.array([0.1, 0.7, -0.4, 1.2])
    idx_np = np.array([3, 0, 2, 2, 1, 3])
    lab_np = np.array([1, 1, 0, 1, 0, 1])
    t_np = np.array([0.5, -0.2, 0.3, 0.1, 0.9, 0.4])
    n = len(idx_np)
    table = wp.array(table_np, dtype=float, requires_grad=True, device=DEVICE)
    scale = wp.array([1.3], dtype=float, requires_grad=True, device=DEVICE)
    index = wp.array(idx_np, dtype=int, device=DEVICE)
    labels = wp.array(lab_np, dtype=int, device=DEVICE)
    targets = wp.array(t_np, dtype=float, device=DEVICE)
    mask = wp.zeros(n, dtype=float, device=DEVICE)
    weights = wp.empty_like(targets)
    pred = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(build_mask, dim=n, inputs=[labels], outputs=[mask], device=DEVICE)
        wp.launch(fill_weights, dim=n, inputs=[targets], outputs=[weights], device=DEVICE)
        wp.launch(gather_predict, dim=n, inputs=[table, index, scale], outputs=[pred], device=DEVICE)
        wp.launch(masked_loss, dim=n, inputs=[pred, targets, mask, weights], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    m_np = (lab_np > 0).astype(np.float64)
    w_np = 1.0 / (1.0 + np.abs(t_np))
    expected = central_differences(lambda tb: objective_np(tb, 1.3, idx_np, t_np, m_np, w_np), table_np)
    return {"grad": table.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
