"""Look-alike: forward + backward captured once into a graph, replayed every iteration.

The captured ``tape.backward()`` does not run at capture time (Warp records the launches
into the graph); it runs at each ``wp.capture_launch``. A gradient check afterwards uses
a fresh tape on zeroed grads. Nothing here accumulates stale gradients or overwrites a
read buffer, so warptrace must stay silent (the shape of Newton's diffsim examples).
"""

# requires-warp: 1.15  (before that, backward launches cannot be captured)
import numpy as np
import warp as wp

wp.config.quiet = True


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def total(y: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, y[wp.tid()])


@wp.kernel
def descend(x: wp.array(dtype=float), grad: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * grad[i]


class Trainer:
    def __init__(self) -> None:
        self.x = wp.array([1.0, -2.0, 0.5], dtype=float, requires_grad=True)
        self.y = wp.zeros(3, dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        with wp.ScopedCapture() as capture:
            self.forward_backward()
        self.graph = capture.graph

    def forward(self) -> wp.array:
        self.loss.zero_()
        wp.launch(square, 3, inputs=[self.x], outputs=[self.y])
        wp.launch(total, 3, inputs=[self.y], outputs=[self.loss])
        return self.loss

    def forward_backward(self) -> None:
        self.tape = wp.Tape()
        with self.tape:
            self.forward()
        self.tape.backward(self.loss)

    def step(self) -> None:
        wp.capture_launch(self.graph)
        wp.launch(descend, 3, inputs=[self.x, self.x.grad, 0.1])
        self.tape.zero()

    def check_grad(self) -> np.ndarray:
        tape = wp.Tape()
        with tape:
            loss = self.forward()
        tape.backward(loss)
        grad = self.x.grad.numpy().copy()
        tape.zero()
        return grad


def run() -> dict:
    trainer = Trainer()
    # a finite-difference style probe before training: assign, evaluate, restore
    start = trainer.x.numpy().copy()
    trainer.x.assign(start + 1e-3)
    trainer.forward()
    trainer.x.assign(start)
    grad = trainer.check_grad()
    for _ in range(3):
        trainer.step()
    return {"grad": grad, "expected": 2.0 * start}


if __name__ == "__main__":
    run()
