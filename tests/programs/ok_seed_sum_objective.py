"""Look-alike (fine): a hand seed of ones whose objective is the SUM, which the program reports.

The seed ``energies.grad.fill_(1.0)`` backpropagates the sum of the per-body energies; the
program reports exactly that sum, with an untaped kernel after each update and with
``wp.utils.array_sum`` on the host side. The seed matches the reported objective: WT304 stays
silent.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
N = 6


@wp.kernel
def body_energy(k: wp.array(dtype=float), q: wp.array(dtype=float), energies: wp.array(dtype=float)):
    i = wp.tid()
    energies[i] = 0.5 * k[0] * q[i] * q[i] + wp.cos(q[i] * k[0])


@wp.kernel
def total_energy(energies: wp.array(dtype=float), total: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(total, 0, energies[i])


def run() -> dict:
    q_np = np.linspace(-1.0, 1.0, N)
    q = wp.array(q_np, dtype=float, device=DEVICE)
    energies = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    total = wp.zeros(1, dtype=float, device=DEVICE)
    k_value = 2.0
    for _ in range(2):
        k = wp.array([k_value], dtype=float, requires_grad=True, device=DEVICE)
        tape = wp.Tape()
        with tape:
            wp.launch(body_energy, dim=N, inputs=[k, q], outputs=[energies], device=DEVICE)
        energies.grad.fill_(1.0)
        tape.backward()
        grad = k.grad.numpy().astype(np.float64).copy()
        k_now = k_value
        k_value -= 0.05 * float(grad[0])
        total.zero_()
        wp.launch(total_energy, dim=N, inputs=[energies], outputs=[total], device=DEVICE)
        reported = (float(total.numpy()[0]), float(wp.utils.array_sum(energies)))
        assert abs(reported[0] - reported[1]) < 1e-4
    expected = np.array([np.sum(0.5 * q_np * q_np - q_np * np.sin(q_np * k_now))])
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
