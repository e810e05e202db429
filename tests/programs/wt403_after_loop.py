"""WT403: a total accumulated by a loop with a runtime trip count, then squared after the loop.

`range(count)` with `count` a kernel argument is a dynamic loop. When the adjoint recomputes
the kernel's forward values it skips that loop, so in the adjoint of the energy line `total`
still holds its value from before the loop (0.0): d energy / d ext comes out 0 instead of
`stiffness * total`.
"""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def chain_energy(ext: wp.array[float], count: int, stiffness: float, energy: wp.array[float]):
    total = float(0.0)
    for k in range(count):
        total += ext[k]
    energy[0] = 0.5 * stiffness * total * total  # expect: WT403


def run() -> dict:
    ext_np = np.array([0.1, -0.05, 0.2, 0.15])
    stiffness = 40.0
    ext = wp.array(ext_np, dtype=float, requires_grad=True, device=DEVICE)
    energy = wp.zeros(1, dtype=float, requires_grad=True, device=DEVICE)
    tape = wp.Tape()
    with tape:
        wp.launch(chain_energy, 1, [ext, len(ext_np), stiffness, energy], device=DEVICE)
    tape.backward(energy)
    expected = np.full_like(ext_np, stiffness * ext_np.sum())
    return {"grad": ext.grad.numpy().copy(), "expected": expected}


if __name__ == "__main__":
    run()
