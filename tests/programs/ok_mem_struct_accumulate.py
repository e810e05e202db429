"""Look-alike (fine): a ``@wp.struct`` state advanced in place, its old value used only linearly.

``drift`` does ``s.q[i] = s.q[i] + DT * s.v[i]`` on a struct field every step, on a tape:
it reads ``s.q`` and stores into it like ``wt104_struct_inplace``, but the adjoint of
the store takes ``adj_q[i]`` (and zeroes it), the adjoint of the load adds the
propagated value back, and neither needs the old value of ``s.q[i]``; ``s.v`` is only
read. The gradient is exact although each replay sees the updated ``s.q``. Compare
``ok_mem_inplace_linear`` (the same through plain array arguments).
"""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 3
STEPS = 4
DT = 0.25
# forbid-info


@wp.struct
class State:
    q: wp.array(dtype=float)
    v: wp.array(dtype=float)


@wp.kernel
def init(x: wp.array(dtype=float), s: State):
    i = wp.tid()
    s.q[i] = x[i] * x[i]


@wp.kernel
def drift(s: State):
    i = wp.tid()
    s.q[i] = s.q[i] + DT * s.v[i]


@wp.kernel
def energy(s: State, loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, s.q[i] * s.q[i])


def run() -> dict:
    x0 = np.array([0.4, -0.8, 1.2])
    v0 = np.array([1.0, -0.5, 0.3])
    x = wp.array(x0, dtype=float, requires_grad=True, device=DEVICE)
    state = State()
    state.q = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    state.v = wp.array(v0, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(init, dim=N, inputs=[x, state], device=DEVICE)
        for _ in range(STEPS):
            wp.launch(drift, dim=N, inputs=[state], device=DEVICE)
        wp.launch(energy, dim=N, inputs=[state], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    q_final = x0 * x0 + STEPS * DT * v0
    grad_x = 2.0 * q_final * 2.0 * x0
    grad_v = 2.0 * q_final * STEPS * DT
    grad = np.concatenate([x.grad.numpy(), state.v.grad.numpy()])
    return {"grad": grad, "expected": np.concatenate([grad_x, grad_v])}


if __name__ == "__main__":
    run()
