"""Fixed twin of ``wt103_capture_eager_backward``: the forward is captured once and replayed
every step, the backward runs eagerly after it, and the next batch is loaded into the input
buffer only after the backward has used the current one.
"""

# requires-warp: 1.15  (the CPU graph capture of a tape)
import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
STEPS = 3


@wp.kernel
def scaled_square(w: wp.array(dtype=float), batch: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    v = w[i] * batch[i]
    wp.atomic_add(loss, 0, v * v)


def batches() -> list[np.ndarray]:
    return [np.array([1.0, 2.0, 3.0]) + step for step in range(STEPS + 1)]


def run() -> dict:
    data = batches()
    w0 = np.array([0.5, -1.0, 2.0])
    w = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
    batch = wp.array(data[0], dtype=float, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with wp.ScopedCapture(device=DEVICE) as capture:
        loss.zero_()
        with tape:
            wp.launch(scaled_square, dim=3, inputs=[w, batch], outputs=[loss], device=DEVICE)
    grads = []
    for step in range(STEPS):
        wp.capture_launch(capture.graph)  # the forward on data[step]
        tape.backward(loss)
        grads.append(w.grad.numpy().copy())
        tape.zero()
        batch.assign(data[step + 1])  # the next batch, once this one's backward is done
    expected = 2.0 * w0 * data[STEPS - 1] ** 2  # d/dw of sum((w * batch)^2) on the step's own batch
    return {"grad": grads[-1], "expected": expected}


if __name__ == "__main__":
    run()
