"""Look-alike of WT503: a state field stored and then read by the same kernel ends with a zero
gradient by design (the shape of warp.tests.test_struct's ``kernel_step_with_copy``).

``step`` stores the new velocity into ``state_out.v`` and then reads it back to advance the
position (``step_with_copy`` does the same through a local copy of the struct); the loss uses
the position only. In the
backward, the adjoint of the read adds the position's gradient into ``state_out.v.grad`` and
the adjoint of the store hands it on to ``state_in.v`` and ``mass`` and clears it (Warp 1.13
and later): the velocity's gradient is exactly zero afterwards, yet the gradient flowed
through it. The recorder's kernel analysis does not follow the local struct copy (it takes
``state_out`` for an input), so the values have to show it: the adjoint launch that wrote
``state_out.v.grad`` also consumed the position's non-zero gradient.
"""
# check-numerics

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
N = 4
DT = 0.01


@wp.struct
class State:
    x: wp.array(dtype=wp.vec3)
    v: wp.array(dtype=wp.vec3)


@wp.kernel
def step(state_in: State, state_out: State, mass: wp.array(dtype=float)):
    i = wp.tid()
    state_out.v[i] = state_in.v[i] + wp.vec3(0.0, 0.0, -9.8) / mass[i] * DT
    state_out.x[i] = state_in.x[i] + state_out.v[i] * DT


@wp.kernel
def step_with_copy(state_in: State, state_out: State, mass: wp.array(dtype=float)):
    i = wp.tid()
    out = State(state_out.x, state_out.v)
    out.v[i] = state_in.v[i] + wp.vec3(0.0, 0.0, -9.8) / mass[i] * DT
    out.x[i] = state_in.x[i] + out.v[i] * DT


@wp.kernel
def energy(x: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, wp.dot(x[i], x[i]))


def run() -> dict:
    rng = np.random.default_rng(7)
    m = rng.random(N) + 0.5
    x0, v0 = rng.normal(size=(N, 3)), rng.normal(size=(N, 3))
    mass = wp.array(m, dtype=float, requires_grad=True, device=DEVICE)
    state_in, state_out = State(), State()
    state_in.x = wp.array(x0, dtype=wp.vec3, requires_grad=True, device=DEVICE)
    state_in.v = wp.array(v0, dtype=wp.vec3, requires_grad=True, device=DEVICE)
    state_out.x = wp.zeros(N, dtype=wp.vec3, requires_grad=True, device=DEVICE)
    state_out.v = wp.zeros(N, dtype=wp.vec3, requires_grad=True, device=DEVICE)
    grads = []
    for kernel in (step, step_with_copy):  # the same step written two ways, as in test_struct
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
        tape = wp.Tape()
        with tape:
            wp.launch(kernel, dim=N, inputs=[state_in, state_out, mass], device=DEVICE)
            wp.launch(energy, dim=N, inputs=[state_out.x], outputs=[loss], device=DEVICE)
        tape.backward(loss)
        grads.append(mass.grad.numpy().copy())
        tape.zero()
    gravity = np.array([0.0, 0.0, -9.8])
    x1 = x0 + (v0 + gravity / m[:, None] * DT) * DT
    expected = (2.0 * x1 * (-gravity / m[:, None] ** 2 * DT * DT)).sum(axis=1)
    return {"grad": np.concatenate(grads), "expected": np.concatenate([expected, expected])}


if __name__ == "__main__":
    run()
