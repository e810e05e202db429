"""Fixed twin of wt302_host_window: the whole horizon on one tape, one backward.

The state still starts from host data and the gradient is still read with ``numpy()``
for a host-side update, but every window is recorded on one tape, so the gradient
covers every path through the carried state.
"""

import numpy as np
import warp as wp
import wt302_host_window_fixed_sim as sim

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
    loss = wp.zeros(1, dtype=float, requires_grad=True, device=sim.DEVICE)
    state = sim.to_device(saved)
    with tape:
        for target in targets:
            state = sim.simulate(state, gain)
            wp.launch(sim.track, dim=3, inputs=[state["q"], target], outputs=[loss], device=sim.DEVICE)
    tape.backward(loss)
    total += gain.grad.numpy()
    tape.zero()

    grad = total.copy()
    gain.assign(gain.numpy() - 0.01 * total)
    expected = sim.central_differences(lambda g: sim.objective_np(g, q0, qd0, targets_np), g_np)
    return {"grad": grad, "expected": expected}


if __name__ == "__main__":
    run()
