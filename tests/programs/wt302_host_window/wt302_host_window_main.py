"""WT302 through the host: state carried as numpy, gradients summed in numpy.

Each window restores its initial state from the host copy of the previous window's
final state (``wp.array(saved)``), records its steps and loss on its own tape and
backpropagates at once; the gain's gradient is read with ``numpy()`` and summed on
the host before ``tape.zero()``, and one gradient step is taken after the last window.
Each window treats its incoming state as a constant, so the sum misses every path by
which the gain acts on later windows through the carried state. Only the content of
the host transfers links one window to the next.
"""

import numpy as np
import warp as wp
import wt302_host_window_sim as sim

wp.config.quiet = True


def run() -> dict:
    q0 = np.array([0.3, -0.2, 0.6])
    qd0 = np.array([0.0, 0.4, -0.1])
    g_np = np.array([2.0, 1.0, 3.0])
    targets_np = [np.array([0.2, 0.1, 0.3]) * (k + 1) for k in range(3)]
    gain = wp.array(g_np, dtype=float, requires_grad=True, device=sim.DEVICE)
    targets = [wp.array(t, dtype=float, device=sim.DEVICE) for t in targets_np]

    saved = {"q": q0, "qd": qd0}
    total = np.zeros_like(g_np)
    tape = wp.Tape()
    for target in targets:
        loss = wp.zeros(1, dtype=float, requires_grad=True, device=sim.DEVICE)
        state = sim.to_device(saved)
        with tape:
            end = sim.simulate(state, gain)
            wp.launch(sim.track, dim=3, inputs=[end["q"], target], outputs=[loss], device=sim.DEVICE)
        tape.backward(loss)  # expect: WT302
        total += gain.grad.numpy()
        tape.zero()
        tape.reset()
        saved = sim.to_host(end)

    grad = total.copy()
    gain.assign(gain.numpy() - 0.01 * total)
    expected = sim.central_differences(lambda g: sim.objective_np(g, q0, qd0, targets_np), g_np)
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
