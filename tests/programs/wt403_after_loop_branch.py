"""WT403, a branch after the loop: a penalty applied only when the accumulated penetration
exceeds a tolerance. The adjoint recomputes the condition without the dynamic loop, with
`depth` still at 0.0, takes the other branch, and never runs the penalty's adjoint: the
gradient is zero instead of `stiffness`.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
TOLERANCE = 0.05


@wp.kernel
def penalty(pen: wp.array[float], count: int, stiffness: float, loss: wp.array[float]):
    depth = float(0.0)
    for k in range(count):
        depth += pen[k]
    if depth > TOLERANCE:  # expect: WT403
        loss[0] = stiffness * (depth - TOLERANCE)


def run() -> dict:
    pen_np = np.array([0.02, 0.04, 0.03])
    pen = wp.array(pen_np, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(penalty, 1, [pen, len(pen_np), 100.0, loss], device=DEVICE)
    tape.backward(loss)
    return {"grad": pen.grad.numpy().copy(), "expected": np.full_like(pen_np, 100.0)}


if __name__ == "__main__":
    run()
