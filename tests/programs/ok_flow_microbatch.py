"""Look-alike of WT203: micro-batch gradient accumulation over several tapes.

Each iteration splits the batch into micro-batches, records one tape per micro-batch
and backpropagates each into the same ``w.grad`` without zeroing in between. That is
deliberate: the parameters do not change between the backward calls, so the sum is
the gradient of the full-batch objective (each micro-batch loss is scaled by 1/N).
The update happens after the last micro-batch, then the gradients are zeroed.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
LR = 0.2


@wp.kernel
def predict(x: wp.array(dtype=float), w: wp.array(dtype=float), pred: wp.array(dtype=float)):
    i = wp.tid()
    pred[i] = w[0] * wp.sin(x[i]) + w[1] * x[i]


@wp.kernel
def scaled_sq_error(
    pred: wp.array(dtype=float), y: wp.array(dtype=float), scale: float, loss: wp.array(dtype=float)
):
    i = wp.tid()
    d = pred[i] - y[i]
    wp.atomic_add(loss, 0, scale * d * d)


def true_grad(w_np, x_np, y_np):
    d = w_np[0] * np.sin(x_np) + w_np[1] * x_np - y_np
    return np.array([np.mean(2.0 * d * np.sin(x_np)), np.mean(2.0 * d * x_np)])


def run() -> dict:
    n, micro, iters = 12, 4, 3
    x_np = np.linspace(-2.0, 2.0, n)
    y_np = 1.5 * np.sin(x_np) - 0.3 * x_np
    batches = [
        (
            wp.array(x_np[k : k + micro], dtype=float, device=DEVICE),
            wp.array(y_np[k : k + micro], dtype=float, device=DEVICE),
        )
        for k in range(0, n, micro)
    ]
    w = wp.array([0.5, 0.5], dtype=float, requires_grad=True, device=DEVICE)
    pred = wp.zeros(micro, dtype=float, requires_grad=True, device=DEVICE)

    for _ in range(iters):
        expected = true_grad(w.numpy().astype(np.float64), x_np, y_np)
        tapes = []
        for xb, yb in batches:
            loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
            tape = wp.Tape()
            with tape:
                wp.launch(predict, dim=micro, inputs=[xb, w], outputs=[pred], device=DEVICE)
                wp.launch(
                    scaled_sq_error, dim=micro, inputs=[pred, yb, 1.0 / n], outputs=[loss], device=DEVICE
                )
            tape.backward(loss)
            tapes.append(tape)
        used = w.grad.numpy().copy()
        w.assign(w.numpy() - LR * used)
        for tape in tapes:
            tape.zero()

    return {"grad": used, "expected": expected}


if __name__ == "__main__":
    run()
