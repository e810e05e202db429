"""Look-alike: gradient checkpointing that hands adjoints over through plain buffers.

The shape of Warp's ``example_fluid_checkpoint``: the last segment is seeded by running
the loss kernel's adjoint by hand; each earlier segment is seeded by copying the adjoint
the later segment produced, saved in a plain (grad-less) buffer in between. Every seed
is a propagated adjoint, not a hand-made constant, so WT304 must stay silent; the
parameter gradient accumulates over segments with unchanged parameters (not WT203).
"""

import numpy as np
import warp as wp

wp.config.quiet = True

N = 6


@wp.kernel
def step(x: wp.array(dtype=float), w: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.sin(x[i]) * w[i] + x[i]


@wp.kernel
def sum_squares(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


def forward_np(x0: np.ndarray, w: np.ndarray) -> float:
    x = x0
    for _ in range(2):
        x = np.sin(x) * w + x
    return float(np.sum(x * x))


def run() -> dict:
    rng = np.random.default_rng(3)
    x0_np = rng.uniform(-1.0, 1.0, N).astype(np.float32)
    w_np = rng.uniform(0.5, 1.5, N).astype(np.float32)
    w = wp.array(w_np, dtype=float, requires_grad=True)
    states = [wp.array(x0_np, dtype=float, requires_grad=True)] + [
        wp.zeros(N, dtype=float, requires_grad=True) for _ in range(2)
    ]
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    checkpoint = wp.clone(states[0], requires_grad=False)
    saved_adjoint = wp.zeros(N, dtype=float)

    # forward without a tape, keeping the segment start
    wp.launch(step, N, inputs=[states[0], w], outputs=[states[1]])
    wp.launch(step, N, inputs=[states[1], w], outputs=[states[2]])
    wp.launch(sum_squares, N, inputs=[states[2]], outputs=[loss])

    # segment 1 (last): replay under a tape, seed with the loss adjoint run by hand
    tape = wp.Tape()
    with tape:
        wp.launch(step, N, inputs=[states[1], w], outputs=[states[2]])
    loss.grad.fill_(1.0)
    wp.launch(
        sum_squares, N, inputs=[states[2]], outputs=[loss], adj_inputs=[states[2].grad],
        adj_outputs=[loss.grad], adjoint=True,
    )  # fmt: skip
    tape.backward()
    wp.copy(saved_adjoint, states[1].grad)
    states[1].grad.zero_()

    # segment 0: restore the start, replay, seed with the saved adjoint
    wp.copy(states[0], checkpoint)
    tape = wp.Tape()
    with tape:
        wp.launch(step, N, inputs=[states[0], w], outputs=[states[1]])
    wp.copy(states[1].grad, saved_adjoint)
    tape.backward()

    eps = 1e-3
    expected = np.zeros(N)
    for k in range(N):
        bump = np.zeros(N)
        bump[k] = eps
        expected[k] = (
            forward_np(x0_np.astype(np.float64), w_np + bump)
            - forward_np(x0_np.astype(np.float64), w_np - bump)
        ) / (2 * eps)
    return {"grad": w.grad.numpy(), "expected": expected}


if __name__ == "__main__":
    run()
