"""WT101 inside a captured graph: ``guess.assign(solution)`` warm-starts the next Newton
iteration in place, and the whole forward and backward is captured once and replayed.

The shape of Newton's diffsim examples (``wp.ScopedCapture`` around forward + backward,
``wp.capture_launch`` per training step), with ``wt101_assign``'s bug in the captured part:
every replay's adjoint sees the final iterate instead of the one each iteration started
from. One root cause, one occurrence per iteration and replay.
"""

# requires-warp: 1.15  (before that, backward launches cannot be captured)
import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 3
ITERS = 3
REPLAYS = 4


@wp.kernel
def newton_step(guess: wp.array(dtype=float), w: wp.array(dtype=float), solution: wp.array(dtype=float)):
    i = wp.tid()
    x = guess[i]
    solution[i] = x - (x * x * x - w[i]) / (3.0 * x * x)


@wp.kernel
def sum_squares(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


def reference_loss(w, x0):
    x = x0.astype(np.float64)
    for _ in range(ITERS):
        x = x - (x**3 - w) / (3.0 * x * x)
    return np.sum(x * x)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


class Solver:
    def __init__(self, x0: np.ndarray, w0: np.ndarray) -> None:
        self.start = wp.array(x0, dtype=float, device=DEVICE)
        self.w = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
        self.guess = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
        self.solutions = [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in range(ITERS)]
        self.loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        with wp.ScopedCapture(device=DEVICE) as capture:
            self.forward_backward()
        self.graph = capture.graph

    def forward_backward(self) -> None:
        wp.copy(self.guess, self.start)  # each replay starts from the same guess
        self.loss.zero_()
        self.tape = wp.Tape()
        with self.tape:
            for it in range(ITERS):
                wp.launch(
                    newton_step,
                    dim=N,
                    inputs=[self.guess, self.w],
                    outputs=[self.solutions[it]],
                    device=DEVICE,
                )
                self.guess.assign(self.solutions[it])  # expect: WT101
            wp.launch(sum_squares, dim=N, inputs=[self.guess], outputs=[self.loss], device=DEVICE)
        self.tape.backward(self.loss)

    def gradient(self) -> np.ndarray:
        wp.capture_launch(self.graph)
        grad = self.w.grad.numpy().copy()
        self.tape.zero()
        return grad


def run() -> dict:
    x0 = np.array([1.0, 1.0, 1.0])
    w0 = np.array([6.0, 10.0, 3.0])
    solver = Solver(x0, w0)
    grads = [solver.gradient() for _ in range(REPLAYS)]
    expected = central_differences(lambda ww: reference_loss(ww, x0), w0)
    return {"grad": grads[-1], "expected": expected}


if __name__ == "__main__":
    run()
