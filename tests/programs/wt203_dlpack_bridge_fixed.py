"""Fixed twin of wt203_dlpack_bridge: the shared gradient is zeroed at the start of each step.

The host side still reads the gradient and updates the parameter through zero-copy
DLPack views, but ``weight.grad.zero_()`` before each step's backward leaves only that step's
gradient in ``weight.grad``.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
STEPS = 3
LR = 0.05


@wp.kernel
def predict(weight: wp.array(dtype=float), x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.tanh(weight[i] * x[i])


@wp.kernel
def squared_error(y: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = y[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


class Layer:
    def __init__(self, w0, x, target):
        n = len(w0)
        self.weight = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
        self.x = wp.array(x, dtype=float, device=DEVICE)
        self.target = wp.array(target, dtype=float, device=DEVICE)
        self.y = wp.zeros(n, dtype=float, requires_grad=True, device=DEVICE)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        # the host side's zero-copy views
        self.weight_view = np.asarray(self.weight)  # writable (DLPack views are read-only)
        self.grad_view = np.from_dlpack(self.weight.grad)

    def step(self):
        self.loss.zero_()
        tape = wp.Tape()
        with tape:
            wp.launch(predict, dim=len(self.x), inputs=[self.weight, self.x], outputs=[self.y], device=DEVICE)
            wp.launch(
                squared_error,
                dim=len(self.x),
                inputs=[self.y, self.target],
                outputs=[self.loss],
                device=DEVICE,
            )
        self.weight.grad.zero_()
        tape.backward(self.loss)


def gradient_np(w, x, target):
    y = np.tanh(w * x)
    return 2.0 * (y - target) * (1.0 - y * y) * x


def run() -> dict:
    w0 = np.array([0.5, -0.3, 1.2])
    x = np.array([1.0, 2.0, -0.5])
    target = np.array([0.2, -0.4, 0.1])
    layer = Layer(w0, x, target)
    for _ in range(STEPS):
        w_now = layer.weight_view.astype(np.float64)
        layer.step()
        grad = layer.grad_view.astype(np.float64)
        layer.weight_view -= LR * layer.grad_view
    return {"grad": grad, "expected": gradient_np(w_now, x, target)}


if __name__ == "__main__":
    run()
