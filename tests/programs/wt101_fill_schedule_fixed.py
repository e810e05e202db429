"""Fixed twin of wt101_fill_schedule: one temperature array per step, all filled before recording."""

import numpy as np
import warp as wp

wp.config.quiet = True

DEVICE = "cpu"
N = 3
DT = 0.5
SCHEDULE = (2.0, 1.0, 0.5, 0.25)


@wp.kernel
def anneal_step(
    x: wp.array(dtype=float),
    w: wp.array(dtype=float),
    temperature: wp.array(dtype=float),
    x_next: wp.array(dtype=float),
):
    i = wp.tid()
    x_next[i] = x[i] + DT * wp.tanh(w[i] * x[i] / temperature[0])


@wp.kernel
def sum_squares(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


def reference_loss(w, x0):
    x = x0.astype(np.float64)
    for temp in SCHEDULE:
        x = x + DT * np.tanh(w * x / temp)
    return np.sum(x * x)


def central_differences(f, p, eps=1e-6):
    grad = np.zeros_like(p)
    for j in range(p.size):
        step = np.zeros_like(p)
        step[j] = eps
        grad[j] = (f(p + step) - f(p - step)) / (2.0 * eps)
    return grad


def run() -> dict:
    x0 = np.array([0.3, -0.2, 0.5])
    w0 = np.array([0.4, 0.6, -0.3])

    w = wp.array(w0, dtype=float, requires_grad=True, device=DEVICE)
    temperatures = [wp.zeros(1, dtype=float, device=DEVICE) for _ in SCHEDULE]
    for temperature, temp in zip(temperatures, SCHEDULE):
        temperature.fill_(temp)
    states = [wp.array(x0, dtype=float, requires_grad=True, device=DEVICE)]
    states += [wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE) for _ in SCHEDULE]
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)

    tape = wp.Tape()
    with tape:
        for t in range(len(SCHEDULE)):
            wp.launch(
                anneal_step,
                dim=N,
                inputs=[states[t], w, temperatures[t]],
                outputs=[states[t + 1]],
                device=DEVICE,
            )
        wp.launch(sum_squares, dim=N, inputs=[states[-1]], outputs=[loss], device=DEVICE)
    tape.backward(loss)

    expected = central_differences(lambda ww: reference_loss(ww, x0), w0)
    return {"grad": w.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
