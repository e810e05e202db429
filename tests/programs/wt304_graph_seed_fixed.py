"""Fixed twin of ``wt304_graph_seed``: the captured hand seed is 1/N, the mean's derivative.

Forward and backward are captured once (``costs.grad.fill_(1.0 / N)`` then
``tape.backward()``); every optimizer step replays the graph and steps ``w`` on the
gradient of the mean cost the program reports.
"""

# requires-warp: 1.15  (before that, backward launches cannot be captured)
import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 8
ITERATIONS = 3
LR = 0.1


@wp.kernel
def residual_costs(
    x: wp.array(dtype=float), y: wp.array(dtype=float), w: wp.array(dtype=float), costs: wp.array(dtype=float)
):
    i = wp.tid()
    d = w[0] * x[i] + w[1] - y[i]
    costs[i] = d * d


@wp.kernel
def sgd(w: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    w[i] = w[i] - lr * grad[i]


class Trainer:
    def __init__(self, x: np.ndarray, y: np.ndarray, w0: np.ndarray) -> None:
        self.x = wp.array(x, dtype=float, device=DEVICE)
        self.y = wp.array(y, dtype=float, device=DEVICE)
        self.w = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
        self.costs = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
        self.history: list[float] = []
        with wp.ScopedCapture(device=DEVICE) as capture:
            self.forward_backward()
        self.graph = capture.graph

    def forward_backward(self) -> None:
        self.tape = wp.Tape()
        with self.tape:
            wp.launch(residual_costs, N, inputs=[self.x, self.y, self.w], outputs=[self.costs], device=DEVICE)
        self.costs.grad.fill_(1.0 / N)
        self.tape.backward()

    def step(self) -> np.ndarray:
        wp.capture_launch(self.graph)
        self.history.append(float(np.mean(self.costs.numpy())))
        grad = self.w.grad.numpy().copy()
        wp.launch(sgd, 2, inputs=[self.w, self.w.grad, LR], device=DEVICE)
        self.tape.zero()
        return grad


def run() -> dict:
    x = np.linspace(0.0, 1.0, N)
    y = 2.0 * x - 1.0 + 0.1 * np.cos(7.0 * x)
    trainer = Trainer(x, y, np.array([0.5, 0.3]))
    trainer.step()
    w = trainer.w.numpy().astype(np.float64)
    grad = trainer.step()
    for _ in range(ITERATIONS - 2):
        trainer.step()
    d = w[0] * x + w[1] - y
    expected = np.array([np.mean(2.0 * d * x), np.mean(2.0 * d)])
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
