"""Fixed twin of wt403_after_loop_branch: the penetration is summed by a @wp.func, whose call
Warp replays, so the adjoint takes the branch the forward pass took."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
TOLERANCE = 0.05


@wp.func
def total_depth(pen: wp.array[float], count: int):
    depth = float(0.0)
    for k in range(count):
        depth += pen[k]
    return depth


@wp.kernel
def penalty(pen: wp.array[float], count: int, stiffness: float, loss: wp.array[float]):
    depth = total_depth(pen, count)
    if depth > TOLERANCE:
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
