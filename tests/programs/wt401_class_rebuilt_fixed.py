"""Fixed twin of wt401_class_rebuilt: the gain writes its product to a distinct array.

``Trainer.step`` records a tape, backpropagates, reads ``self.w.grad.numpy()`` and
replaces ``self.w`` with a new array built from the updated values (a fresh allocation
every step, at the same line). Every read must agree: each step's ``self.w`` is its own parameter.
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 4
ITERS = 3
LR = 0.02


@wp.kernel
def lift(x: wp.array(dtype=float), h: wp.array(dtype=float)):
    i = wp.tid()
    h[i] = wp.sin(x[i]) + 1.5


@wp.kernel
def apply_gain(h: wp.array(dtype=float), w: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    out[i] = h[i] * w[i]


@wp.kernel
def energy(h: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, h[i] * h[i])


class Trainer:
    def __init__(self, x0, w0):
        self.x = wp.array(x0, dtype=float, device=DEVICE)
        self.w = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)

    def forward(self, tape):
        h = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
        out = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        with tape:
            wp.launch(lift, dim=N, inputs=[self.x], outputs=[h], device=DEVICE)
            wp.launch(apply_gain, dim=N, inputs=[h, self.w], outputs=[out], device=DEVICE)
            wp.launch(energy, dim=N, inputs=[out], outputs=[loss], device=DEVICE)
        return loss

    def step(self):
        tape = wp.Tape()
        loss = self.forward(tape)
        tape.backward(loss)
        grad = self.w.grad.numpy()
        self.w = wp.array(self.w.numpy() - LR * grad, dtype=float, requires_grad=True, device=DEVICE)
        return grad


def run() -> dict:
    x0 = np.array([0.3, -0.5, 1.2, 0.7])
    trainer = Trainer(x0, np.array([1.0, 0.8, 1.3, 0.6]))
    grads, expected = [], []
    for _ in range(ITERS):
        w_now = trainer.w.numpy().astype(np.float64)
        h = np.sin(x0) + 1.5
        expected.append(2.0 * w_now * h * h)
        grads.append(trainer.step())
    return {"grad": np.concatenate(grads), "expected": np.concatenate(expected)}


if __name__ == "__main__":
    run()
