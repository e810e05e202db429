"""Fixed twin of wt104_nested_struct: projected positions go to a second Body of the model."""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 4
RADIUS = 1.0


@wp.struct
class Body:
    q: wp.array(dtype=float)


@wp.struct
class Model:
    body: Body
    projected: Body
    stiffness: wp.array(dtype=float)


@wp.kernel
def potential_energy(model: Model, energy: wp.array(dtype=float)):
    i = wp.tid()
    q = model.body.q[i]
    wp.atomic_add(energy, 0, 0.25 * model.stiffness[i] * q * q * q * q)


@wp.kernel
def project_positions(model: Model, raw: wp.array(dtype=float)):
    i = wp.tid()
    model.projected.q[i] = RADIUS * wp.tanh(raw[i] / RADIUS)


@wp.kernel
def total_loss(model: Model, energy: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    if i == 0:
        wp.atomic_add(loss, 0, energy[0])
    q = model.projected.q[i]
    wp.atomic_add(loss, 0, model.stiffness[i] * q * q)


def reference_loss(stiffness, q0, raw):
    energy = np.sum(0.25 * stiffness * q0**4)
    q = RADIUS * np.tanh(raw / RADIUS)
    return energy + np.sum(stiffness * q * q)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    q0 = np.array([1.5, -2.0, 0.8, 1.2])
    raw0 = np.array([0.3, -0.4, 2.0, 0.1])
    k0 = np.array([1.0, 0.5, 2.0, 1.5])

    model = Model()
    model.body = Body()
    model.body.q = wp.array(q0, dtype=float, requires_grad=True, device=DEVICE)
    model.projected = Body()
    model.projected.q = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    model.stiffness = wp.array(k0, dtype=float, requires_grad=True, device=DEVICE)
    raw = wp.array(raw0, dtype=float, requires_grad=True, device=DEVICE)
    energy = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        wp.launch(potential_energy, dim=N, inputs=[model], outputs=[energy], device=DEVICE)
        wp.launch(project_positions, dim=N, inputs=[model, raw], device=DEVICE)
        wp.launch(total_loss, dim=N, inputs=[model, energy], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = central_differences(lambda kk: reference_loss(kk, q0, raw0), k0)
    return {"grad": model.stiffness.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
