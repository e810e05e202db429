"""Look-alike (fine): a hand seed of ones, the values otherwise only summarized non-linearly.

The seed backpropagates the sum of the residual energies, the objective the program
optimizes (its docstring and its check say so). Besides, it prints a worst-case metric
(``atomic_max``) and the root-mean-square of the residuals: reductions that are not linear
in the seeded values define no competing objective. WT304 stays silent.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"
N = 5


@wp.kernel
def residual_energy(s: wp.array(dtype=float), x: wp.array(dtype=float), e: wp.array(dtype=float)):
    i = wp.tid()
    r = s[0] * x[i] - 1.0
    e[i] = r * r


@wp.kernel
def worst(e: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_max(out, 0, e[i])


@wp.kernel
def mean_square(e: wp.array(dtype=float), out: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(out, 0, e[i] * e[i] / float(N))


def run() -> dict:
    x_np = np.linspace(0.5, 1.5, N)
    x = wp.array(x_np, dtype=float, device=DEVICE)
    s = wp.array([0.7], dtype=float, requires_grad=True, device=DEVICE)
    e = wp.zeros(N, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(residual_energy, dim=N, inputs=[s, x], outputs=[e], device=DEVICE)
    e.grad.fill_(1.0)
    tape.backward()
    metrics = wp.zeros(2, dtype=float, device=DEVICE)
    wp.launch(worst, dim=N, inputs=[e], outputs=[metrics[0:1]], device=DEVICE)
    wp.launch(mean_square, dim=N, inputs=[e], outputs=[metrics[1:2]], device=DEVICE)
    worst_energy, rms = float(metrics.numpy()[0]), float(np.sqrt(metrics.numpy()[1]))
    assert worst_energy >= rms * rms
    expected = np.array([np.sum(2.0 * (0.7 * x_np - 1.0) * x_np)])
    return {"grad": s.grad.numpy().astype(np.float64), "expected": expected}


if __name__ == "__main__":
    run()
