"""Look-alike (fine): a native snippet stores into an array element through a ``wp.ref``
parameter, from another element passed by value.

``double_into`` is a ``@wp.func_native`` whose C++ body writes ``out = 2 * y``, with an
``adj_snippet`` for the gradient. The recorder cannot see inside the snippet; its
signature says ``x[i]`` is passed by value (a read, nothing more) and ``out[i]`` by
reference (it may be read or overwritten). Neither is a proven in-place update, so no
error is reported; at most an info saying what could not be checked.
"""

# requires-warp: 1.15

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 3


@wp.func_native(
    "out = y * 2.0f;",
    adj_snippet="""
    adj_y += 2.0f * adj_out;
    adj_out = 0.0f;
    """,
)
def double_into(out: wp.ref[wp.float32], y: wp.float32): ...


@wp.kernel
def double_kernel(x: wp.array(dtype=wp.float32), out: wp.array(dtype=wp.float32)):
    i = wp.tid()
    double_into(out[i], x[i])


@wp.kernel
def square_sum(out: wp.array(dtype=wp.float32), loss: wp.array(dtype=wp.float32)):
    i = wp.tid()
    wp.atomic_add(loss, 0, out[i] * out[i])


def run() -> dict:
    x0 = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    x = wp.array(x0, dtype=wp.float32, requires_grad=True, device=DEVICE)
    out = wp.zeros(N, dtype=wp.float32, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=wp.float32, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(double_kernel, dim=N, inputs=[x], outputs=[out], device=DEVICE)
        wp.launch(square_sum, dim=N, inputs=[out], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    # loss = sum((2x)^2) = 4 sum(x^2): d/dx = 8x
    return {"grad": x.grad.numpy().copy(), "expected": 8.0 * x0.astype(np.float64)}


if __name__ == "__main__":
    run()
