"""WT101 inside a captured training step: the forward overwrites a state its tape read.

The shape of Newton's diffsim examples: forward and backward are captured once with
``wp.ScopedCapture`` (``tape.backward(loss)`` inside), then every optimizer step replays
the graph (``wp.capture_launch``) and steps the parameters on their gradient outside it.
Inside the captured forward, ``state.assign(next_state)`` advances the state in place
after ``advance`` read it: every replay's adjoint of ``advance`` sees the advanced state
instead of the one it read, so the gradient of ``k`` handed to the optimizer is wrong at
every step.
"""

# requires-warp: 1.15  (before that, backward launches cannot be captured)
import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 4
STEPS = 3
ITERATIONS = 4
LR = 0.05


@wp.kernel
def advance(state: wp.array(dtype=float), k: wp.array(dtype=float), next_state: wp.array(dtype=float)):
    i = wp.tid()
    x = state[i]
    next_state[i] = x + 0.1 * wp.sin(k[i] * x)


@wp.kernel
def squared_distance(
    state: wp.array(dtype=float), target: wp.array(dtype=float), loss: wp.array(dtype=float)
):
    i = wp.tid()
    d = state[i] - target[i]
    wp.atomic_add(loss, 0, d * d)


@wp.kernel
def sgd(k: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    k[i] = k[i] - lr * grad[i]


def simulate(k: np.ndarray, x0: np.ndarray, target: np.ndarray) -> float:
    x = x0.astype(np.float64)
    for _ in range(STEPS):
        x = x + 0.1 * np.sin(k * x)
    return float(np.sum((x - target) ** 2))


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


class Trainer:
    def __init__(self, x0: np.ndarray, k0: np.ndarray, target: np.ndarray) -> None:
        self.x0 = wp.array(x0, dtype=float, device=DEVICE)
        self.k = wp.array(k0, dtype=float, requires_grad=True, device=DEVICE)
        self.target = wp.array(target, dtype=float, device=DEVICE)
        self.state = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
        self.next_state = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        with wp.ScopedCapture(device=DEVICE) as capture:
            self.forward_backward()
        self.graph = capture.graph

    def forward_backward(self) -> None:
        wp.copy(self.state, self.x0)  # every replay starts from the same state
        self.loss.zero_()
        self.tape = wp.Tape()
        with self.tape:
            for _ in range(STEPS):
                wp.launch(advance, N, inputs=[self.state, self.k], outputs=[self.next_state], device=DEVICE)
                self.state.assign(self.next_state)  # expect: WT101
            wp.launch(
                squared_distance, N, inputs=[self.state, self.target], outputs=[self.loss], device=DEVICE
            )
        self.tape.backward(self.loss)

    def step(self) -> np.ndarray:
        wp.capture_launch(self.graph)
        grad = self.k.grad.numpy().copy()
        wp.launch(sgd, N, inputs=[self.k, self.k.grad, LR], device=DEVICE)
        self.tape.zero()
        return grad


def run() -> dict:
    x0 = np.array([0.3, -0.5, 0.8, 1.1])
    k0 = np.array([1.0, 2.0, -1.5, 0.7])
    target = np.array([0.6, 0.0, 0.5, 1.4])
    trainer = Trainer(x0, k0, target)
    trainer.step()
    k = trainer.k.numpy().astype(np.float64)
    grad = trainer.step()
    for _ in range(ITERATIONS - 2):
        trainer.step()
    expected = central_differences(lambda kk: simulate(kk, x0, target), k)
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
