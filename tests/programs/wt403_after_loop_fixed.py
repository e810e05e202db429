"""Fixed twin of wt403_after_loop: the loop lives in a @wp.func that returns the raw total,
and the kernel squares it. Warp replays calls (the function runs again, loop included), so
the adjoint of the energy line sees the real total."""

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.func
def total_extension(ext: wp.array[float], count: int):
    total = float(0.0)
    for k in range(count):
        total += ext[k]
    return total


@wp.kernel
def chain_energy(ext: wp.array[float], count: int, stiffness: float, energy: wp.array[float]):
    total = total_extension(ext, count)
    energy[0] = 0.5 * stiffness * total * total


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
