"""WT103 in one replay of several: the forward is captured once and replayed every step,
the backward runs eagerly after it, and at the end of an epoch the input buffer is
reloaded with the next epoch's data before that step's backward.

Only the last step of each epoch is wrong (its adjoint sees the next epoch's data), so
the first replays, which have no write between their forward and backward, look
different from the one that does: each replay must be judged by itself. The fixed twin
reloads after the backward.
"""

# requires-warp: 1.15  (the CPU graph capture of a tape)
import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
STEPS_PER_EPOCH = 3


@wp.kernel
def scaled_square(w: wp.array(dtype=float), batch: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    v = w[i] * batch[i]
    wp.atomic_add(loss, 0, v * v)


def run() -> dict:
    epochs = [np.array([1.0, 2.0, 3.0]), np.array([2.0, 1.0, 0.5])]
    w0 = np.array([0.5, -1.0, 2.0])
    w = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
    batch = wp.array(epochs[0], dtype=float, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with wp.ScopedCapture(device=DEVICE) as capture:
        loss.zero_()
        with tape:
            wp.launch(scaled_square, dim=3, inputs=[w, batch], outputs=[loss], device=DEVICE)
    grads = []
    for step in range(STEPS_PER_EPOCH):
        wp.capture_launch(capture.graph)  # the forward on the first epoch's data
        if step == STEPS_PER_EPOCH - 1:
            batch.assign(epochs[1])  # expect: WT103
        tape.backward(loss)
        grads.append(w.grad.numpy().copy())
        tape.zero()
    expected = 2.0 * w0 * epochs[0] ** 2  # d/dw of sum((w * batch)^2) on the step's own data
    return {"grad": grads[-1], "expected": expected}


if __name__ == "__main__":
    run()
